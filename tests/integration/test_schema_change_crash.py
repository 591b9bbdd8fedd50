"""A SIGKILL during a schema change: the process dies right after the new version is
stored, before the batch that met the field runs again; the restart on the same
checkpoint reads with that version, and every record lands once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from crashing import batch_ids, spawn, wait_until
from pyspark.sql import SparkSession

from inprocess import invoke
from streamsmith.io.lake import read_table, table_path
from streamsmith.io.schema_store import schema_dir, versions

pytestmark = pytest.mark.slow

FILES = 5  # one per batch; files from NEW_FROM on hold a field the first ones lack
NEW_FROM = 3
RECORDS = 20


def write_file(folder: Path, number: int) -> None:
    records = [
        {"id": f"{number}-{i}", "n": i, **({"region": f"r{i % 3}"} if number >= NEW_FROM else {})}
        for i in range(RECORDS)
    ]
    lines = "\n".join(json.dumps(record) for record in records) + "\n"
    (folder / f"part-{number:02d}.jsonl").write_text(lines)


def start(home: Path, trigger: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "streamsmith", "run", str(home), "--trigger", trigger]
    return spawn(command)


def test_sigkill_right_after_a_new_version_then_restart_loses_and_duplicates_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    spec = {
        "name": "crashy",
        "storage_root": "data",
        "sources": {"events": {"format": "jsonl", "path": "input/events", "schema": "infer",
                               "max_files_per_trigger": 1}},
        "flows": {"events": {"sql": "SELECT * FROM events", "sink": {"table": "events"}}},
    }  # fmt: skip
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(spec))
    folder = tmp_path / "data/input/events"
    folder.mkdir(parents=True)
    for number in range(NEW_FROM):  # what the schema is inferred from
        write_file(folder, number)
    root = tmp_path / "data"
    store = schema_dir(root, "crashy", "events")
    process = start(tmp_path, "interval=0s")
    try:
        assert wait_until(process, (store / "0.json").is_file, 120)
        for number in range(NEW_FROM, FILES):
            write_file(folder, number)
        assert wait_until(process, (store / "1.json").is_file, 300)
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate(timeout=60)
    commits = batch_ids(root / "checkpoints/crashy/events/commits")
    assert len(commits) < FILES, stderr[-3000:]  # killed with work left

    # The restart, in this process's session: the checkpoint, not the process, is the point.
    restarted = invoke("run", str(tmp_path), "--trigger", "available-now")
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert [v.ddl for v in versions(store)] == [
        "id string, n bigint",
        "id string, n bigint, region string",
    ]
    rows = read_table(spark, table_path(root, "events")).collect()
    ids = [row.id for row in rows]
    assert len(ids) == len(set(ids)) == FILES * RECORDS  # each record once
    assert {row.region for row in rows if int(row.id.split("-")[0]) >= NEW_FROM} == {
        "r0",
        "r1",
        "r2",
    }
    assert {row.region for row in rows if int(row.id.split("-")[0]) < NEW_FROM} == {None}
