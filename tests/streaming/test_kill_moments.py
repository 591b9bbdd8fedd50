"""The moments a SIGKILL can land in that the chaos run found (``benchmarks/chaos.py``),
each set up by hand: the checkpoint files exactly as such a kill leaves them."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from pyspark.sql import SparkSession

from feeds import feed_project
from streamsmith.config import Trigger
from streamsmith.io.lake import read_table, table_path
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import run_pipeline
from streamsmith.runtime.start import start_queries, stop_gracefully
from waiting import wait_for


def test_a_query_killed_writing_its_first_offsets_starts_again(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Killed while Spark wrote a query's first offset-log entry, the write's temporary
    file stays; Spark 4 then refused the checkpoint on every start
    (``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``): the query could never run again."""
    folder = feed_project(tmp_path, "first_write", schema="id string, n int")
    (folder / "part-0.jsonl").write_text(json.dumps({"id": "a", "n": 1}) + "\n")
    app, pipeline = load_pipeline(tmp_path / "streamsmith.yml")
    plan = build_plan(app, pipeline, Trigger("available-now"))
    # What a SIGKILL inside HDFSMetadataLog's atomic write of batch 0 leaves: the
    # query's metadata and a hidden, half-written offset file, with its checksum.
    for output in (output for flow in plan.flows for output in flow.outputs):
        offsets = output.checkpoint / "offsets"
        offsets.mkdir(parents=True)
        (output.checkpoint / "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}))
        (offsets / ".0.5d1c0f3e-0000-4000-8000-000000000000.tmp").write_text("v1\n{")
        (offsets / "..0.5d1c0f3e-0000-4000-8000-000000000000.tmp.crc").write_bytes(b"crc")
    report = run_pipeline(spark, plan)
    assert not report.failed, report.failed
    rows = read_table(spark, table_path(tmp_path / "data", "events")).collect()
    assert [(row.id, row.n) for row in rows] == [("a", 1)]
    assert not list((tmp_path / "data/checkpoints").rglob("offsets/.*.tmp"))


def test_rejects_of_a_batch_the_file_sink_had_committed_reach_the_quarantine(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Killed after the table's sink (Delta's, or Spark's file sink) logged batch 0 and
    before the query's commit log did, and before the quarantine query wrote that input's
    rejects. On restart the sink skips batch 0 without running it, and Spark still
    reports the batch's observed metrics, as zeros; the quarantine query took "0
    rejected" for the truth and skipped its batch: the reject was never quarantined."""
    folder = feed_project(tmp_path, "sink_ahead", schema="id string, n int")
    lines = [json.dumps({"id": "a", "n": 1}), '{"id": "b", "n": ', json.dumps({"id": "c", "n": 3})]
    (folder / "part-0.jsonl").write_text("\n".join(lines) + "\n")
    app, pipeline = load_pipeline(tmp_path / "streamsmith.yml")
    plan = build_plan(app, pipeline, Trigger("available-now"))
    assert not run_pipeline(spark, plan).failed
    root = tmp_path / "data"
    quarantine = table_path(root, "events_quarantine")
    assert read_table(spark, quarantine).count() == 1
    # Back to the moment of the kill: the table's batch 0 is in its sink's log but not
    # in the query's commit log; the quarantine's batch 0 neither wrote nor committed.
    checkpoints = {output.role: output.checkpoint for output in plan.flows[0].outputs}
    for role in ("main", "quarantine"):
        for name in ("0", ".0.crc"):
            (checkpoints[role] / "commits" / name).unlink()
    for written in quarantine.rglob("batch-0-*"):  # a Parquet table's batch 0
        written.unlink()
    for entry in (quarantine / "_delta_log").iterdir():  # a Delta table's: version 1,
        version = entry.name.lstrip(".").split(".")[0]  # its checksums included
        if version.isdigit() and int(version) > 0:
            entry.unlink()
    # Always-on, as in the chaos run: the quarantine query finds the main query running.
    queries = start_queries(spark, build_plan(app, pipeline, Trigger("interval", 0.5)))
    try:
        side = next(query for output, query in queries if output.role == "quarantine")
        wait_for(lambda: side.lastProgress is not None, "the quarantine's batch 0", every_s=0.2)
    finally:
        stop_gracefully(queries, 60)
    rows = read_table(spark, quarantine).collect()
    assert [(row.raw, row.position) for row in rows] == [('{"id": "b", "n": ', "2")]
    assert sorted(row.id for row in read_table(spark, table_path(root, "events")).collect()) == [
        "a",
        "c",
    ]
