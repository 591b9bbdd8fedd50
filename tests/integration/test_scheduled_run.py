"""``streamsmith run`` with a schedule, as a user runs it: one process, runs on time,
SIGTERM stops it cleanly; then a catch-up with nothing new ends before Spark starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from streamsmith.monitor.eventlog import read_events
from streamsmith.runtime.scheduler import SPEEDUP_ENV
from waiting import wait_for

SPEC = {
    "name": "clicks",
    "storage_root": "data",
    "trigger": "available-now",
    "schedule": "* * * * *",
    "spark": {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": 2}},
    "sources": {"clicks": {"format": "jsonl", "path": "input",
                           "schema": "user string, ms int"}},
    "flows": {"raw": {"source": "clicks", "sql": "SELECT user, ms FROM clicks",
                      "sink": {"table": "raw"}}},
}  # fmt: skip


def streamsmith(*args: str) -> list[str]:
    return [sys.executable, "-m", "streamsmith", *args]


def deliver(folder: Path, name: str, users: list[str]) -> None:
    """A file of clicks, whole or not at all (a run may list the folder at any moment)."""
    lines = [json.dumps({"user": user, "ms": 1}) for user in users]
    staging = folder / "data/input" / f".{name}.tmp"  # hidden: no run reads it
    staging.write_text("\n".join(lines) + "\n")
    staging.replace(folder / "data/input" / f"{name}.jsonl")


def rows_per_run(root: Path) -> list[int]:
    """Input rows of each finished run that read something, in order."""
    return [
        int(event["input_rows"])
        for event in read_events(root, "clicks")
        if event["event"] == "run_finished" and not event.get("nothing_new")
    ]


def test_scheduled_runs_in_one_process_then_nothing_new_without_spark(tmp_path: Path) -> None:
    (tmp_path / "data/input").mkdir(parents=True)
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(SPEC))
    root = tmp_path / "data"
    deliver(tmp_path, "a", ["u1", "u2"])
    env = {k: v for k, v in os.environ.items() if k != "STREAMSMITH_ROOT"}
    env[SPEEDUP_ENV] = "20"  # every minute comes every 3 s
    process = subprocess.Popen(
        streamsmith("run"), cwd=tmp_path, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_for(lambda: rows_per_run(root) == [2], "the first scheduled run", 150)
        deliver(tmp_path, "b", ["u3"])
        wait_for(lambda: rows_per_run(root) == [2, 1], "the second scheduled run", 60)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr
    assert "clicks.raw: 2 batches, 3 records read, 3 rows written" in stdout
    runs = [e for e in read_events(root, "clicks") if e.get("schedule") == "clicks"]
    kinds = [e["event"] for e in runs]
    assert kinds[0] == "scheduled" and kinds[-1] == "unscheduled"
    assert kinds.count("run_started") == kinds.count("run_finished") + kinds.count("run_stopped")

    status = subprocess.run(
        streamsmith("status", "--format", "json"), cwd=tmp_path, env=env,
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    rows = {row["query"]: row for row in map(json.loads, status.stdout.splitlines())}
    raw = rows["clicks.raw"]
    assert raw["state"] == "stopped"
    assert (raw["schedule"]["cron"], raw["schedule"]["next_run"]) == ("* * * * *", None)
    assert raw["schedule"]["last_run_state"] in ("finished", "nothing new", "stopped")

    again = subprocess.run(
        streamsmith("run", "--trigger", "available-now"), cwd=tmp_path, env=env,
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "nothing new" in again.stderr and "starting Spark" not in again.stderr
    assert "clicks.raw: 0 batches, 0 records read, 0 rows written" in again.stdout
    last = read_events(root, "clicks")[-1]
    assert (last["event"], last["nothing_new"], last["queries"]) == (
        "run_finished", True, ["clicks.raw", "clicks.raw.quarantine"]
    )  # fmt: skip
