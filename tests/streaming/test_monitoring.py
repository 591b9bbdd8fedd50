"""The monitor and the supervisor on real queries: the event log against Spark's own
progress, counts that reconcile, metrics, the Kafka copy, restarts, give-ups and
notifications."""

from __future__ import annotations

import gzip
import json
import os
import re
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType
from typer.testing import CliRunner

from receivers import notification_receivers
from streamsmith.apps import get_app
from streamsmith.cli import cli
from streamsmith.config import Trigger, load_spec
from streamsmith.generate.activity import activity_data
from streamsmith.generate.events import Knobs
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.kafka.source import SOURCE_NAME, register_kafka_source
from streamsmith.io.lake import read_table, table_path
from streamsmith.monitor.eventlog import read_events
from streamsmith.monitor.progress import records_read
from streamsmith.monitor.recorder import flush_listener_bus
from streamsmith.monitor.status import query_statuses
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.app import App, FlowDefinition
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import PipelineError, backfill, run_pipeline
from streamsmith.runtime.supervisor import plan_monitor
from streamsmith.testing import ChunkRunner
from streamsmith.web.data import DashboardFold
from waiting import wait_for


def test_event_log_matches_recent_progress_and_reconciles(
    spark: SparkSession,
    tmp_path: Path,
    pg_dsn: str,
    broker: EmbeddedBroker,
    topic: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STREAMSMITH_PG_DSN", pg_dsn)
    data = activity_data(
        users=6, events=300, chunks=3, seed=21,
        knobs=Knobs(duplicates=0.1, late=0.2, too_late=0.05, corrupt=0.03),
    )  # fmt: skip
    labels = data.label_counts
    assert labels["too_late"] and labels["corrupt"]
    app = get_app("activity")
    sets = [
        "monitor.metrics_port=0",
        f"kafka.bootstrap_servers={broker.bootstrap}",
        f"monitor.kafka_topic={topic}",
        "flows.sessions.enabled=false",
    ]
    plan = build_plan(
        app,
        load_spec(app.default_spec, sets=sets, storage_root=str(tmp_path)),
        Trigger("interval", 0.0),
    )
    monitor = plan_monitor(plan)
    monitor.attach(spark, lambda: {"all": "active"})
    assert monitor.server is not None
    with ChunkRunner(spark, plan) as runner:
        for chunk in data.chunks:
            runner.send(chunk)
    flush_listener_bus(spark)
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{monitor.server.port}/metrics").read()
    health = urllib.request.urlopen(f"http://127.0.0.1:{monitor.server.port}/health").read()
    monitor.detach(spark)

    events = [e for e in read_events(tmp_path, "activity") if e["event"] == "progress"]
    logged = {(e["query"], e["batch_id"]): e for e in events}
    for output, query in runner.queries:
        # Spark also lists idle triggers (no batch ran); the log has them as "idle" events.
        progress = [p for p in query.recentProgress if "addBatch" in p.durationMs]
        assert progress, output.spark_name
        for p in progress:
            record = logged[(output.spark_name, p.batchId)]
            # Records, not Spark's input rows: those count blank lines too.
            read = records_read(json.loads(p.json))
            assert record["query_id"] == str(p.id) and record["input_rows"] == read
            assert record["batch_ms"] == p.durationMs["triggerExecution"]
            assert record["state_rows"] == sum(op.numRowsTotal for op in p.stateOperators)
            watermark = p.eventTime.get("watermark", "1970-01-01T00:00:00.000Z")
            assert (record["watermark"] or "1970-01-01T00:00:00.000Z") == watermark
        assert len([key for key in logged if key[0] == output.spark_name]) == len(progress)

    def total(query: str, field: str) -> int:
        return sum(int(e[field] or 0) for e in events if e["query"] == query)

    # in = counted + quarantined + late + deduplicated, from the event log alone
    assert total("activity.user_counts", "input_rows") == len(data.delivered)
    assert total("activity.user_counts.quarantine", "quarantined") == labels["corrupt"]
    assert total("activity.user_counts.late", "late") == labels["too_late"]
    late_table = read_table(spark, table_path(tmp_path, "user_counts_late")).count()
    assert late_table == labels["too_late"]
    assert json.loads(health) == {"healthy": True, "queries": {"all": "active"}}
    lines = metrics.decode().splitlines()
    rows_metric = 'streamsmith_input_rows_total{app="activity",query="activity.user_counts"}'
    assert f"{rows_metric} {float(len(data.delivered))}" in lines

    register_kafka_source(spark)
    forwarded = [
        json.loads(row.value)
        for row in spark.read.format(SOURCE_NAME)
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .load()
        .collect()
    ]
    assert len(forwarded) == len(read_events(tmp_path, "activity"))
    assert Counter(e["event"] for e in forwarded)["progress"] == len(events)


LINES = StructType([StructField("value", StringType())])


def _explode_on_boom(frame: DataFrame) -> DataFrame:
    """Fails every batch holding the line ``boom``, with a message quoting a secret."""
    failing = F.when(
        F.col("value") == "boom", F.raise_error(F.lit("upstream refused password s3cret-pw"))
    )
    return frame.select(F.coalesce(failing.cast("string"), F.col("value")).alias("line"))


FAULTY = App(
    name="faulty",
    description="a flow that fails on a poison line",
    flows=(FlowDefinition(name="lines", transform=_explode_on_boom, quarantine=False),),
    default_spec={
        "app": "faulty",
        "sources": {"lines": {"format": "text", "path": "input"}},
        "flows": {"lines": {"source": "lines", "sink": {"table": "lines"}}},
    },
)


def test_supervisor_retries_then_gives_up_and_tells_everyone(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "input").mkdir()
    (tmp_path / "input/a.txt").write_text("ok\nboom\n")
    with notification_receivers() as received:
        sets = [
            "supervisor.max_retries=2",
            "supervisor.backoff=100ms",
            "postgres.dsn=host=db user=app password=s3cret-pw",
            *received.spec_sets(),
        ]
        spec = load_spec(FAULTY.default_spec, sets=sets, storage_root=str(tmp_path))
        with pytest.raises(PipelineError, match=r"query faulty\.lines failed: .*\*\*\*"):
            run_pipeline(spark, build_plan(FAULTY, spec, Trigger("available-now")))
        assert received.wait_for(lambda r: "gave_up" in r.events())
        assert received.wait_for(lambda r: len(r.mails) == len(r.posts))

    events = read_events(tmp_path, "faulty")
    kinds = [e["event"] for e in events if e.get("query") == "faulty.lines"]
    assert Counter(kinds)["failure"] == 3 and Counter(kinds)["restart"] == 2
    assert kinds[-1] == "gave_up" or "gave_up" in kinds
    assert received.events() == ["failure", "restart", "failure", "restart", "failure", "gave_up"]
    assert [post["attempt"] for post in received.posts[:2]] == [1, 1]
    assert received.mails[-1]["Subject"] == "[streamsmith] faulty: gave_up in faulty.lines"
    log_text = "".join(p.read_text() for p in (tmp_path / "_monitor/events").iterdir())
    assert "s3cret-pw" not in log_text and "upstream refused password ***" in log_text
    assert all("s3cret-pw" not in json.dumps(post) for post in received.posts)

    result = CliRunner().invoke(
        cli, ["status", "faulty", "--root", str(tmp_path), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    (status,) = [json.loads(line) for line in result.output.splitlines()]
    assert (status["state"], status["restarts"]) == ("failed", 2)
    assert "***" in status["last_error"] and "s3cret" not in result.output


def test_file_batches_widen_for_a_backlog_and_narrow_once_caught_up(
    spark: SparkSession, tmp_path: Path
) -> None:
    inbox = tmp_path / "input"
    inbox.mkdir()

    def deliver(first: int, count: int) -> None:
        for number in range(first, first + count):
            path = inbox / f"{number:03d}.txt"
            path.write_text(f"line {number}\n")
            os.utime(path, (1_700_000_000 + number, 1_700_000_000 + number))

    deliver(0, 12)
    sets = ["sources.lines.min_files_per_trigger=2", "sources.lines.max_files_per_trigger=5"]
    spec = load_spec(FAULTY.default_spec, sets=sets, storage_root=str(tmp_path))
    plan = build_plan(FAULTY, spec, Trigger("interval", 0.2))
    stop = threading.Event()
    outcome: list[object] = []
    runner = threading.Thread(target=lambda: outcome.append(run_pipeline(spark, plan, stop)))
    runner.start()

    def events(kind: str) -> list[dict[str, Any]]:
        return [e for e in read_events(tmp_path, "faulty") if e["event"] == kind]

    def rows_read() -> int:
        return sum(e["input_rows"] for e in events("progress"))

    try:
        wait_for(lambda: bool(events("resize")), "a resize event", 180)
        deliver(12, 4)
        wait_for(lambda: rows_read() == 16, "16 rows read", 180)
    finally:
        stop.set()
        runner.join(120)
    assert outcome, "the run raised"
    sizes = [e["input_rows"] for e in events("progress") if e["input_rows"]]
    assert sizes == [5, 5, 2, 2, 2]  # the cap while behind, the floor once caught up
    (resize,) = events("resize")
    # The check runs every few seconds: it narrows once the backlog fits one floor-sized
    # batch, with the last 2 files still to read or already read.
    assert re.fullmatch(r"maxFilesPerTrigger 5 -> 2: [0-2] files behind", resize["message"])


def test_a_backfill_is_a_run_whose_counts_status_shows(spark: SparkSession, tmp_path: Path) -> None:
    spec = {
        "name": "bf",
        "storage_root": "data",
        "sources": {"events": {"format": "jsonl", "path": "input/events",
                               "schema": "id string, n bigint", "required": ["id"]}},
        "flows": {"events": {"sql": "SELECT * FROM events", "sink": {"table": "events"},
                             "expect": {"positive": {"sql": "n > 0", "action": "drop"}}}},
    }  # fmt: skip
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(spec))
    folder = tmp_path / "data/input/events"
    folder.mkdir(parents=True)
    lines = ['{"id": "a", "n": 1}', '{"id": "b", "n": -1}', '{"id": "c", "n": 2}', '{"n": 3}',
             "{broken"]  # fmt: skip
    (folder / "part-0.jsonl").write_text("\n".join(lines) + "\n")
    app, pipeline = load_pipeline(tmp_path / "streamsmith.yml")
    report = backfill(spark, build_plan(app, pipeline))
    assert report.rows == {"events": 2, "events_quarantine": 2}
    root = tmp_path / "data"
    events = read_events(root, "bf")
    runs = [e for e in events if e["event"].startswith("run_")]
    assert [e["event"] for e in runs] == ["run_started", "run_finished"]
    assert runs[0]["queries"] == ["bf.events.backfill"] and runs[0]["backfill"]
    assert runs[1]["input_rows"] == 5  # every record read, the rejected ones too
    (status,) = [s for s in query_statuses(events) if s.query == "bf.events.backfill"]
    assert (status.state, status.batches, status.quarantined, status.late) == ("stopped", 1, 2, 0)
    assert status.expectations == {"positive": {"passed": 2, "failed": 1}}


def test_a_sql_flow_reports_the_records_it_read_and_the_rows_it_wrote(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Not the rows after its filter: a gzipped file is one row of Spark's input, a
    filter leaves 1 of the 10 records read. A second flow over the same source (its
    sibling keeps the quarantine, so it runs no side query) counts the same records."""
    spec = {
        "name": "rw",
        "storage_root": "data",
        "sources": {"events": {"format": "jsonl", "path": "input/events", "compression": "gzip",
                               "schema": "id string, n bigint", "required": ["id"]}},
        "flows": {"big": {"sql": "SELECT * FROM events WHERE n > 8", "sink": {"table": "big"}},
                  "small": {"sql": "SELECT * FROM events WHERE n < 2",
                            "sink": {"table": "small"}}},
    }  # fmt: skip
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(spec))
    folder = tmp_path / "data/input/events"
    folder.mkdir(parents=True)
    lines = [json.dumps({"id": str(n), "n": n}) for n in range(9)] + [
        '{"n": 9}',
        '{"id": "x", "n": 10}',
    ]
    with gzip.open(folder / "part-0.jsonl.gz", "wt") as zipped:
        zipped.write("\n".join(lines) + "\n")
    app, pipeline = load_pipeline(tmp_path / "streamsmith.yml")
    report = run_pipeline(spark, build_plan(app, pipeline, Trigger("available-now")))
    (main,) = [q for q in report.queries if q.name == "rw.big"]
    assert (main.batches, main.input_rows, main.output_rows) == (1, 11, 1)
    (sibling,) = [q for q in report.queries if q.name == "rw.small"]
    assert (sibling.batches, sibling.input_rows, sibling.output_rows) == (1, 11, 2)
    assert not any(q.name == "rw.small.quarantine" for q in report.queries)
    events = read_events(tmp_path / "data", "rw")
    (batch,) = [e for e in events if e["event"] == "progress" and e["query"] == "rw.big"]
    assert (batch["input_rows"], batch["output_rows"]) == (11, 1)
    (end,) = [e for e in events if e["event"] == "run_finished"]
    assert (end["input_rows"], end["output_rows"]) == (22, 3)
    # The record without an id is quarantined: the run's lines and its end say so.
    (side,) = [q for q in report.queries if q.name == "rw.big.quarantine"]
    assert side.summary() == "rw.big.quarantine: 1 batches, 1 records quarantined"
    assert main.summary() == "rw.big: 1 batches, 11 records read, 1 rows written"
    assert (end["quarantined"], end["late"]) == (1, 0)
    assert end["message"] == (
        "3 queries, 22 records read, 3 rows written, 1 quarantined, 0 late, 0 failed"
    )


def test_a_kafka_flow_reports_how_long_its_records_waited_in_status_and_the_dashboard(
    spark: SparkSession, tmp_path: Path, broker: EmbeddedBroker, topic: str, produce: Any
) -> None:
    """From each record's Kafka timestamp to its processing, per batch: p50 and p99 in the
    event log, `status`, /metrics and the dashboard's data."""
    produce(topic, [json.dumps({"id": str(n), "n": n}).encode() for n in range(30)])
    spec = {
        "name": "waits",
        "storage_root": "data",
        "trigger": "available-now",
        "kafka": {"bootstrap_servers": broker.bootstrap},
        "sources": {"events": {"format": "kafka", "schema": "id string, n bigint",
                               "options": {"subscribe": topic, "startingOffsets": "earliest"}}},
        "flows": {"small": {"sql": "SELECT * FROM events WHERE n < 5", "sink": {"table": "small"}}},
    }  # fmt: skip
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(spec))
    app, pipeline = load_pipeline(tmp_path / "streamsmith.yml")
    produced_by = int(time.time() * 1000)
    run_pipeline(spark, build_plan(app, pipeline))
    waited_at_most = int(time.time() * 1000) - produced_by + 1000  # the run, give or take

    root = tmp_path / "data"
    (batch,) = [e for e in read_events(root, "waits") if e["event"] == "progress"
                and e["query"] == "waits.small" and e["input_rows"]]  # fmt: skip
    assert batch["input_rows"] == 30
    p50, p99, most = batch["latency_p50_ms"], batch["latency_p99_ms"], batch["latency_max_ms"]
    assert 0 <= p50 <= p99 <= most <= waited_at_most, batch
    (status,) = [s for s in query_statuses(read_events(root)) if s.query == "waits.small"]
    assert (status.latency_p50_ms, status.latency_p99_ms) == (p50, p99)
    shown = CliRunner().invoke(cli, ["status", "--root", str(root)])
    assert f"latency p50 {p50} ms, p99 {p99} ms" in shown.output
    quarantine = [s for s in query_statuses(read_events(root)) if s.query.endswith("quarantine")]
    assert all(s.latency_p50_ms is None for s in quarantine)  # the flow's query reports it
    fold = DashboardFold()
    for event in read_events(root):
        fold.add(event)
    points = fold.data()["series"]["waits.small"]
    assert [(p["latency_p50_ms"], p["latency_p99_ms"]) for p in points if p["input_rows"]] == [
        (p50, p99)
    ]
