"""What cleans up after an always-on run never takes what a restart needs.

Spark keeps ``spark.sql.streaming.minBatchesToRetain`` batches of a checkpoint's offsets,
commits and state versions; streamsmith rotates and prunes its event log
(``monitor.file_mb``, ``monitor.retention``). Here both are set as tight as they go and
every batch is a restart on the cleaned checkpoint: the table must still hold each
window exactly once, and ``status`` and ``checkpoint show`` still answer.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession
from test_checkpoints import tally_app, write  # this folder is on the tests' path

from streamsmith.config import Trigger, load_spec
from streamsmith.io.lake import read_table, table_path
from streamsmith.monitor.eventlog import log_files, read_events
from streamsmith.monitor.status_cache import cached_statuses
from streamsmith.runtime.checkpoint_files import read_checkpoint
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import run_pipeline

RETAIN = 2
RUNS = 5


def numbered(folder: Path) -> list[int]:
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def test_a_restart_after_every_cleanup_resumes_exactly_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    app = tally_app()
    monitor = {"file_mb": 0.001, "retention": "1s"}  # a new file per second, kept a second
    spec = load_spec(app.default_spec, overrides={"monitor": monitor}, storage_root=str(tmp_path))
    plan = build_plan(app, spec, Trigger("available-now"))
    checkpoint = plan.outputs[0].checkpoint
    before = spark.conf.get("spark.sql.streaming.minBatchesToRetain")
    spark.conf.set("spark.sql.streaming.minBatchesToRetain", str(RETAIN))
    try:
        for hour in range(9, 9 + RUNS):  # each run a restart on what the last one left
            write(tmp_path, f"{hour}.json", [
                ("ann", "d1", f"2026-11-20T{hour:02d}:05:00Z", 1),
                ("bob", "d2", f"2026-11-20T{hour:02d}:30:00Z", 1),
            ])  # fmt: skip
            run_pipeline(spark, plan)
            tallies = read_table(spark, table_path(tmp_path, "tallies")).collect()
            closed = sorted((r.window_start.hour, r.user, r.tally) for r in tallies)
            assert closed == [(h, u, 1) for h in range(9, hour) for u in ("ann", "bob")]
    finally:
        spark.conf.set("spark.sql.streaming.minBatchesToRetain", before)

    # Two batches a run (the data, then the watermark's), RETAIN of them kept: Spark
    # purges after a commit, so one more may be there till the next.
    last = numbered(checkpoint / "commits")[-1]
    assert last == 2 * RUNS - 1
    for log in ("offsets", "commits"):
        assert numbered(checkpoint / log)[0] >= last - RETAIN, log
    assert len(log_files(tmp_path, "tally")) < RUNS  # pruned as the runs went on
    (status,) = cached_statuses(tmp_path, "tally")
    assert (status.query, status.state) == ("tally.tallies", "stopped")
    view = read_checkpoint(status.query, checkpoint, read_events(tmp_path))
    assert view.last_commit == last and view.offsets == [{"logOffset": RUNS - 1}]
