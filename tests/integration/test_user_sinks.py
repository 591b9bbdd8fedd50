"""Sinks added as one module each, run as a user runs them: console and foreach_batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

EVENTS = [
    {"phone_id": "p1", "time": "2026-11-25T10:05:00Z", "action": "open"},
    {"phone_id": "p2", "time": "2026-11-25T10:15:00Z", "action": "open"},
    {"phone_id": "p1", "time": "2026-11-25T10:20:00Z", "action": "close"},
    {"phone_id": "p3", "time": "2026-11-25T10:40:00Z", "action": "open"},
    {"phone_id": "p2", "time": "2026-11-25T11:10:00Z", "action": "close"},
]

USER_SINK = '''
import json
from pathlib import Path


def keep(batch_df, batch_id, folder):
    """Idempotent per batch: the batch's file is replaced on a replay."""
    rows = [row.asDict() for row in batch_df.collect()]
    Path(folder, f"batch-{batch_id}.json").write_text(json.dumps(rows, default=str))
'''


def test_console_and_foreach_batch_sinks_from_the_cli(tmp_path: Path) -> None:
    root, code, batches = tmp_path / "root", tmp_path / "code", tmp_path / "batches"
    for folder in (root / "input/actions", code, batches):
        folder.mkdir(parents=True)
    lines = [json.dumps(event) for event in EVENTS] + ['{"phone_id": "p9", "time": ']
    (root / "input/actions/part-0.json").write_text("\n".join(lines) + "\n")
    (code / "user_sink.py").write_text(USER_SINK)
    env = {k: v for k, v in os.environ.items() if k != "STREAMSMITH_ROOT"}
    env["PYTHONPATH"] = os.pathsep.join([str(code), env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, "-m", "streamsmith", "run", "actions", "--root", str(root),
         "--trigger", "available-now",
         "--set", "flows.action_counts.sink.format=foreach_batch",
         "--set", "flows.action_counts.sink.function=user_sink:keep",
         "--set", f"flows.action_counts.sink.options.folder={batches}",
         "--set", "flows.action_counts_sliding.sink.format=console",
         "--set", "flows.action_counts_sliding.sink.num_rows=50"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr[-3000:]
    # foreach_batch: the user's function got every batch; the newest row per window wins.
    latest: dict[tuple[str, str], int] = {}
    for batch in sorted(batches.glob("batch-*.json"), key=lambda p: int(p.stem.split("-")[1])):
        for row in json.loads(batch.read_text()):
            latest[(row["action"], row["window_start"])] = row["count"]
    assert latest == {
        ("open", "2026-11-25 10:00:00"): 3,
        ("close", "2026-11-25 10:00:00"): 1,
        ("close", "2026-11-25 11:00:00"): 1,
    }
    # console: Spark's table of each batch on standard output.
    assert "Batch: 0" in result.stdout
    assert "|       window_start|         window_end|action|count|" in result.stdout
    assert "|2026-11-25 09:10:00|2026-11-25 10:10:00|  open|    1|" in result.stdout
