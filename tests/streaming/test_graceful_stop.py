"""A graceful stop waits for the batch in flight, not for the backlog to drain: with no
trigger interval a query with a backlog starts its next batch at once."""

from __future__ import annotations

import json
import time
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

FILES = 20


def test_a_graceful_stop_with_a_backlog_ends_after_the_batch_in_flight(
    spark: SparkSession, tmp_path: Path
) -> None:
    folder = feed_project(tmp_path, "backlog", schema="id string, n int", max_files_per_trigger=1)
    for number in range(FILES):
        record = json.dumps({"id": f"r{number}", "n": number})
        (folder / f"part-{number:03d}.jsonl").write_text(record + "\n")
    app, pipeline = load_pipeline(tmp_path / "streamsmith.yml")
    queries = start_queries(spark, build_plan(app, pipeline, Trigger("interval", 0.0)))
    (main,) = [query for output, query in queries if output.role == "main"]
    wait_for(lambda: main.lastProgress is not None, "a first batch", every_s=0.1)
    asked = time.monotonic()
    stop_gracefully(queries, 300)
    took = time.monotonic() - asked
    done = main.lastProgress["batchId"] + 1
    print(f"stopped after {done} of {FILES} batches in {took:.1f} s")
    assert done < FILES / 2, f"drained {done} of {FILES} batches in {took:.1f} s"
    # What the stop left is read on the next start, each record once.
    app, pipeline = load_pipeline(
        tmp_path / "streamsmith.yml", sets=["sources.events.max_files_per_trigger=100"]
    )
    run_pipeline(spark, build_plan(app, pipeline, Trigger("available-now")))
    ids = [row.id for row in read_table(spark, table_path(tmp_path / "data", "events")).collect()]
    assert sorted(ids) == sorted(f"r{number}" for number in range(FILES))
