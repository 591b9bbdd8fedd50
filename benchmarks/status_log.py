"""What ``streamsmith status`` costs over a long event log: the first look, and the next.

An always-on app writes a progress event per query and batch (about 2 KB each): four
queries at one batch a second write about 350,000 a day. In a ``streamsmith init``
project after one ``run --trigger available-now``, the script appends ``--events``
copies of that run's progress events (batch ids counting up) as one more process's
log, then times ``status`` in fresh processes: the first look, and ``--runs`` more with
one batch of new events appended before each (what ``status --watch`` or a person
checking again sees). ``--src DIR`` times another checkout's code, for a before/after.

    .venv/bin/python benchmarks/status_log.py --events 350000
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from cold_start import child_env, cli_seconds  # this folder is on a script's path

from streamsmith.monitor.eventlog import events_dir, read_events
from streamsmith.scaffold import init_project


def append_progress(log: Path, templates: list[dict[str, Any]], first: int, count: int) -> None:
    """``count`` progress events cycling over ``templates``, batch ids from ``first``."""
    with log.open("a", encoding="utf-8") as file:
        for number in range(count):
            event = dict(templates[number % len(templates)])
            event["batch_id"] = first + number // len(templates)
            file.write(json.dumps(event) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=350_000, help="progress events in the log")
    parser.add_argument("--runs", type=int, default=5, help="looks after the first")
    parser.add_argument("--src", type=Path, help="time this checkout's src folder instead")
    args = parser.parse_args()
    env = child_env(args.src)
    with tempfile.TemporaryDirectory(prefix="status-log-") as folder:
        project = Path(folder) / "clicks"
        init_project(project)
        cli_seconds(["run", "--trigger", "available-now"], project, env)
        root = project / "data"
        templates = [e for e in read_events(root) if e["event"] == "progress"]
        log = events_dir(root) / f"{templates[0]['app']}-29991231T000000-1.jsonl"
        append_progress(log, templates, 1_000, args.events)
        size = log.stat().st_size
        first = cli_seconds(["status"], project, env)
        later = []
        for run in range(args.runs):
            append_progress(log, templates, 1_000 + args.events + run, len(templates))
            later.append(cli_seconds(["status"], project, env))
    print(f"event log: {args.events:,} progress events, {size / 1e6:.0f} MB")
    print(f"status, first look         {first:6.2f} s")
    print(f"status, next looks median  {statistics.median(later):6.2f} s   (of {args.runs})")


if __name__ == "__main__":
    main()
