"""Exactly-once under crashes: SIGKILL the pipeline mid-batch, restart on its checkpoint.

The pipeline runs in a subprocess (its own JVM) with one file per batch; the test kills
the whole process group while a batch is in flight (offsets written, commit not yet),
restarts with ``available-now``, and checks that every eventID landed exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from crashing import batch_ids, kill_mid_batch, spawn, wait_until
from pyspark.sql import SparkSession

from inprocess import invoke
from streamsmith.generate.cloudtrail import generate_cloudtrail
from streamsmith.io.lake import register_lake_views
from streamsmith.io.lake_paths import is_delta

pytestmark = pytest.mark.slow

CHECKPOINT = Path("checkpoints/cloudtrail/cloudtrail_events")
FILES = 5  # one per batch: the crash comes in the first ones, the restart does the rest
ONE_FILE_PER_BATCH = ("--set", "sources.cloudtrail_logs.max_files_per_trigger=1")


def start_pipeline(root: Path, *args: str) -> subprocess.Popen[str]:
    return spawn(
        [sys.executable, "-m", "streamsmith", "run", "cloudtrail", "--root", str(root), *args]
    )


def test_sigkill_mid_batch_then_restart_loses_and_duplicates_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    generated = generate_cloudtrail(
        tmp_path / "input/cloudtrail",
        files=FILES,
        records_per_file=200,
        seed=3,
        corrupt_fraction=0.1,
    )
    process = start_pipeline(tmp_path, "--trigger", "interval=0s", *ONE_FILE_PER_BATCH)
    kill_mid_batch(process, tmp_path / CHECKPOINT)
    assert len(batch_ids(tmp_path / CHECKPOINT / "commits")) < FILES  # work left to do

    # The restart, in this process's session: the checkpoint, not the process, is the point.
    restart = ("--trigger", "available-now", *ONE_FILE_PER_BATCH)
    restarted = invoke("run", "cloudtrail", "--root", str(tmp_path), *restart)
    assert restarted.returncode == 0, restarted.stderr[-3000:]

    tables = register_lake_views(spark, tmp_path)
    # Delta tables (the default): the main query's streaming sink, the quarantine's
    # appends marked with their batch ids.
    assert is_delta(tables["cloudtrail_events"]) and is_delta(
        tables["cloudtrail_events_quarantine"]
    )
    ids = [r.eventID for r in spark.table("cloudtrail_events").select("eventID").collect()]
    assert len(ids) == len(set(ids)), "an eventID landed twice"
    assert set(ids) == generated.valid_event_ids
    assert spark.table("cloudtrail_events_quarantine").count() == generated.quarantine_rows
    assert batch_ids(tmp_path / CHECKPOINT / "commits") == set(range(FILES))


@pytest.mark.deep
def test_sigterm_stops_after_the_current_batch(tmp_path: Path) -> None:
    generate_cloudtrail(tmp_path / "input/cloudtrail", files=16, records_per_file=100, seed=8)
    process = start_pipeline(tmp_path, "--trigger", "interval=0s", *ONE_FILE_PER_BATCH)
    try:
        started = wait_until(
            process, lambda: len(batch_ids(tmp_path / CHECKPOINT / "commits")) >= 2, 300
        )
        # To the main process only, as systemd's KillMode=mixed does: a SIGTERM to the whole
        # group would also end the JVM at once (Ctrl-C is fine: PySpark's JVM ignores SIGINT).
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate(timeout=60)
    assert started, stderr[-3000:]
    assert process.returncode == 0, stderr[-3000:]
    assert "SIGTERM: stopping after the current batch" in stderr
    offsets = batch_ids(tmp_path / CHECKPOINT / "offsets")
    commits = batch_ids(tmp_path / CHECKPOINT / "commits")
    assert len(commits) < 16, "the backlog was drained before stopping"
    # At most the batch that began as the current one ended is left, redone next start.
    assert offsets - commits <= {max(commits) + 1}, "more than the next batch was left"
    assert "cloudtrail.cloudtrail_events:" in stdout


@pytest.mark.deep
def test_a_run_whose_jvm_dies_says_so_in_one_line(tmp_path: Path) -> None:
    """The OOM killer, or a SIGTERM to the whole process group, ends the driver JVM under
    the run: the run fails with one line saying what happened, not a trace of py4j's."""
    generate_cloudtrail(tmp_path / "input/cloudtrail", files=16, records_per_file=100, seed=8)
    process = start_pipeline(tmp_path, "--trigger", "interval=0s", *ONE_FILE_PER_BATCH)
    try:
        started = wait_until(
            process, lambda: len(batch_ids(tmp_path / CHECKPOINT / "commits")) >= 1, 300
        )
        jvm = _java_child(process.pid)
        os.kill(jvm, signal.SIGKILL)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate(timeout=60)
    assert started, stderr[-3000:]
    assert process.returncode == 1, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("error: the Spark JVM ended before its queries stopped"), last
    # No trace through streamsmith's code (PySpark's accumulator server still prints the
    # EOFError its thread met when the JVM's connection dropped).
    assert "streamsmith/" not in stderr, stderr[-3000:]


def _java_child(pid: int) -> int:
    """The JVM a process started (its child running java)."""
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in children.read_text().split():
            if "java" in Path(f"/proc/{child}/comm").read_text():
                return int(child)
    raise AssertionError(f"process {pid} has no java child")
