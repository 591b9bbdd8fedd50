"""``streamsmith init --source kafka``: the generated README's commands, run in order as
its reader types them (a broker started by the project, the sample produced to it, a
catch-up run, the generated tests), land the same rows as the files project."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

FENCE = re.compile(r"^```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)
# What a catch-up run closes: windows up to the watermark, 10:12 less 5 minutes.
CLOSED_BEFORE = "2026-01-01 10:07"


def streamsmith(words: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    program = ["-m", "pytest", "-q", "-p", "no:cacheprovider"] if words[0] == "pytest" else []
    argv = [sys.executable, *(program or ["-m", "streamsmith"]), *words[1:]]
    env = {k: v for k, v in os.environ.items() if k != "STREAMSMITH_ROOT"}
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_kafka_project_runs_as_its_readme_says(tmp_path: Path) -> None:
    made = streamsmith(["streamsmith", "init", "clicks", "--source", "kafka"], tmp_path)
    assert made.returncode == 0, made.stderr
    project = tmp_path / "clicks"
    assert (project / "sample/clicks.jsonl").is_file()
    assert not (project / "data").exists()
    # Port 9092 may be taken on a test machine: the project moves as its user would.
    port = str(free_port())
    spec = project / "streamsmith.yml"
    spec.write_text(spec.read_text().replace("9092", port))
    (block,) = FENCE.findall((project / "README.md").read_text())
    commands = [line.split("#")[0].replace("9092", port).strip() for line in block.splitlines()]
    # What runs forever or only reads is left out; the rest runs in the README's order.
    wanted = ("broker start", "topic produce", "run --trigger", "pytest", "broker stop")
    ran = []
    try:
        for command in commands:
            if not any(part in command for part in wanted):
                continue
            result = streamsmith(shlex.split(command), project)
            assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}\n{result.stderr}"
            ran.append(command)
            if command.startswith("streamsmith topic produce"):
                assert "produced 17 records to topic clicks" in result.stdout
            if command.startswith("streamsmith run"):
                windows = pq.read_table(project / "data/tables/clicks_per_minute").to_pylist()
                assert windows, "no closed window"
                assert all(str(w["window_end"]) <= CLOSED_BEFORE for w in windows), windows
                slow = pq.read_table(project / "data/tables/slow_clicks").column("ms")
                assert sorted(slow.to_pylist()) == [1400, 1800, 2100]
                quarantine = project / "data/tables/clicks_per_minute_quarantine"
                reasons = pq.read_table(quarantine).column("reason").to_pylist()
                assert sorted(reasons) == [
                    "missing or invalid field ts",
                    "missing or invalid field user",
                ]
            if command == "pytest":
                assert "2 passed" in result.stdout
    finally:
        if "streamsmith broker stop" not in ran:
            streamsmith(["streamsmith", "broker", "stop"], project)
    assert len(ran) == len(wanted)
