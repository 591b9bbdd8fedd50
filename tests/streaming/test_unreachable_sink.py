"""A sink that cannot be reached when the run starts (its database still down) is
retried with backoff, as a failing query is, instead of ending the run (found by the
chaos run: PostgreSQL away at the pipeline's start left it down until the next fault)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import psycopg
from pyspark.sql import SparkSession

from feeds import feed_project
from streamsmith.config import Trigger
from streamsmith.io.postgres.server import PostgresServer, start_postgres, stop_postgres
from streamsmith.monitor.eventlog import read_events
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import run_pipeline


def test_a_database_down_at_start_is_waited_for(
    spark: SparkSession, postgres: PostgresServer, pg_dsn: str, tmp_path: Path
) -> None:
    folder = feed_project(tmp_path, "late_db", schema="id string, n int")
    records = [json.dumps({"id": f"r{n}", "n": n}) for n in range(5)]
    (folder / "part-0.jsonl").write_text("\n".join(records) + "\n")
    sets = [f"postgres.dsn={pg_dsn}", "flows.events.sink.format=postgres",
            "supervisor.backoff=1s", "supervisor.max_backoff=2s",
            "supervisor.max_retries=30"]  # fmt: skip
    app, pipeline = load_pipeline(tmp_path / "streamsmith.yml", sets=sets)
    plan = build_plan(app, pipeline, Trigger("available-now"))
    stop_postgres(postgres.home, "fast")
    back = threading.Timer(8.0, start_postgres, args=(postgres.home,))
    back.start()
    started = time.monotonic()
    try:
        run_pipeline(spark, plan)
    finally:
        back.join()
    assert time.monotonic() - started > 8  # it did wait for the database
    with psycopg.connect(pg_dsn) as conn:
        ids = sorted(row[0] for row in conn.execute("SELECT id FROM events"))
    assert ids == [f"r{n}" for n in range(5)]
    events = read_events(tmp_path / "data", "late_db")
    failures = [e["message"] for e in events if e["event"] == "failure"]
    assert failures[0].startswith("start failed: cannot connect to PostgreSQL")
    assert all("cannot connect to PostgreSQL" in message for message in failures)
    assert not [e for e in events if e["event"] == "gave_up"]
