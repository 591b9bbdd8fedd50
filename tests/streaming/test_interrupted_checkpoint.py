"""A process killed while Spark wrote a query's first offset-log entry leaves only the
write's temporary file behind; Spark 4 then refuses the checkpoint on every later start
(``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``), and the query could never run again.
Found by the chaos run (``benchmarks/chaos.py --profile short --seed 3``)."""

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


def test_a_query_killed_writing_its_first_offsets_starts_again(
    spark: SparkSession, tmp_path: Path
) -> None:
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
