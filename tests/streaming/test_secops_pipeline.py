"""The security platform end to end: generated traffic with injected incidents, fed one
time slice at a time to every flow, then checked against the generator's ground truth
(counts, DHCP attribution, alerts) and against a batch backfill of the same input."""

from __future__ import annotations

import io
import json
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from rich.console import Console
from typer.testing import CliRunner

from receivers import notification_receivers
from streamsmith.apps import get_app
from streamsmith.apps.secops_report import secops_report
from streamsmith.cli import cli
from streamsmith.config import PipelineSpec, Trigger, load_spec
from streamsmith.demo import run_secops_demo
from streamsmith.errors import UserError
from streamsmith.generate.secops import SOURCES, SecopsData, secops_data
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.kafka.source import SOURCE_NAME, register_kafka_source
from streamsmith.io.lake import (
    backfill_path,
    model_path,
    read_table,
    replace_static_table,
    table_path,
)
from streamsmith.io.webhook import WebhookTarget, start_webhook_stream
from streamsmith.ml.anomaly import MODEL_NAME, save, train
from streamsmith.processes import free_port
from streamsmith.runtime.plan import Plan, build_plan
from streamsmith.runtime.runner import backfill
from streamsmith.runtime.start import start_queries
from streamsmith.schemas.security import ASSETS_SCHEMA, FLOW_SCHEMA
from streamsmith.transforms.secops import host_windows
from waiting import wait_for


def write_chunk(root: Path, data: SecopsData, number: int) -> None:
    for source in ("dhcp", "flows", "auth"):
        folder = root / "input" / "secops" / source
        staging = folder / f".{number:05d}.tmp"
        staging.write_bytes(b"".join(line + b"\n" for line in data.chunks[source][number]))
        staging.replace(folder / f"secops-{source}-{number:05d}.json")


@pytest.mark.deep
def test_the_platform_structures_attributes_and_alerts_exactly(
    spark: SparkSession, tmp_path: Path, broker: EmbeddedBroker
) -> None:
    data = secops_data(devices=20, chunks=6, seed=1, corrupt_fraction=0.02)
    assets = table_path(tmp_path, "assets")
    replace_static_table(assets, data.assets, ASSETS_SCHEMA)
    broker.create_topic("alerts", partitions=1)
    app = get_app("secops")
    with notification_receivers() as received:
        sets = [
            f"kafka.bootstrap_servers={broker.bootstrap}",
            "flows.alert_topic.enabled=true",
            "flows.alert_webhook.enabled=true",
            f"flows.alert_webhook.sink.url={received.webhook_url}",
        ]
        spec = load_spec(app.default_spec, sets=sets, storage_root=str(tmp_path))
        run_slices(spark, tmp_path, data, build_plan(app, spec, Trigger("interval", 0.0)))
    check_outputs(spark, tmp_path, data, received.posts, broker.bootstrap)

    # The same code as a batch job over the same input: the same results, ids included.
    backfill(spark, build_plan(app, spec, Trigger("available-now")))
    alerts = read_table(spark, table_path(tmp_path, "alerts")).collect()
    batch_alerts = read_table(spark, backfill_path(tmp_path, "alerts")).collect()
    assert sorted(a.alert_id for a in batch_alerts) == sorted(a.alert_id for a in alerts)
    batch_devices = read_table(spark, backfill_path(tmp_path, "auth_devices"))
    assert {r.event_id: r.mac for r in batch_devices.collect()} == data.holders
    leases = read_table(spark, table_path(tmp_path, "leases")).collect()
    batch_leases = read_table(spark, backfill_path(tmp_path, "leases")).collect()
    assert sorted(batch_leases) == sorted(leases)

    check_report(spark, spec, data)


def check_report(spark: SparkSession, spec: PipelineSpec, data: SecopsData) -> None:
    """The daily report over the lake the stream wrote, against the ground truth."""
    report = secops_report(spark, spec, date(2026, 11, 20))
    auth = [json.loads(line) for line in data.lines("auth") if line.endswith(b"}")]
    auth = [r for r in auth if r.get("event_id") in data.holders]
    failures = Counter(r["user"] for r in auth if r["result"] == "failure")
    assert {r.user: r.failures for r in report.failed_logins} == failures
    assert report.failed_logins[0].user == "user-03"  # the brute force's victim
    assert report.top_talkers[0].src_ip == "10.20.0.15"  # ws-05, the anomalous host
    assert {r.rule: r.alerts for r in report.alerts} == {
        "anomaly": 1, "brute_force": 3, "device_offline": 1, "new_device": 1,
    }  # fmt: skip
    assert report.counts["logins"] == data.events["auth"]
    assert sum(r.failures for r in report.failures_by_hour) == sum(failures.values())
    page = report.html.read_text(encoding="utf-8")
    assert page.count("<svg") == 2 and "user-03" in page and "brute_force" in page
    again = secops_report(spark, spec, date(2026, 11, 20))  # a rerun replaces its day
    assert read_table(spark, again.tables["report_alerts"]).count() == 4


# The six time slices of input in three deliveries: a first batch alone, then two slices
# at once; the inventory changes (and a model appears) before the last three.
DELIVERIES = ((0,), (1, 2), (3, 4, 5))


def run_slices(spark: SparkSession, root: Path, data: SecopsData, plan: Plan) -> None:
    """Every flow over the data, delivered a few time slices at a time; the inventory
    changes halfway."""
    assets = table_path(root, "assets")
    for source in SOURCES:
        (root / "input" / "secops" / source).mkdir(parents=True)
    queries = [query for _, query in start_queries(spark, plan)]
    ws03 = data.assets[3][0]
    try:
        for numbers in DELIVERIES:
            if numbers[0] == 3:  # the inventory changes while the stream runs
                train_model(spark, root)  # and a model appears: scoring starts
                changed = [(*row[:2], "user-03b", *row[3:]) if row[0] == ws03 else row
                           for row in data.assets]  # fmt: skip
                replace_static_table(assets, changed, ASSETS_SCHEMA)
            for number in numbers:
                write_chunk(root, data, number)
            for query in queries:
                query.processAllAvailable()
        # The last windows close in the no-data batch Spark runs once the watermark has
        # moved; processAllAvailable returns when the input is read, maybe before it.
        alerts = table_path(root, "alerts")
        wait_for(
            lambda: read_table(spark, alerts).count() >= len(data.incidents),
            f"{len(data.incidents)} alerts",
            90,
            every_s=0.5,
        )
        for query in queries:
            query.processAllAvailable()
        # Timers clear what they close: the lease tracker's state is the live leases
        # (one per IP, with its timer), not the history of DHCP events.
        leases = next(q for q in queries if q.name == "secops.leases").lastProgress
        rows = sum(int(op["numRowsTotal"]) for op in leases["stateOperators"])
        assert rows <= 2 * len(data.assets) < data.events["dhcp"], rows
    finally:
        for query in queries:
            query.stop()


def train_model(spark: SparkSession, root: Path) -> None:
    """Fit the anomaly model on a quiet day before (no anomaly injected) and make it
    current, as ``streamsmith train secops-anomaly`` does over the lake."""
    history = secops_data(seed=2, anomalous_host=False, start=datetime(2026, 11, 19, 8, tzinfo=UTC))
    lines = [line.decode() for line in history.lines("flows")]
    flows = spark.read.schema(FLOW_SCHEMA).json(spark.sparkContext.parallelize(lines))
    clean = flows.dropna(subset=["event_time", "src_ip", "bytes"]).filter("bytes >= 0")
    model, fitted = train(host_windows(clean))
    save(model, fitted, model_path(root, MODEL_NAME))


def check_outputs(
    spark: SparkSession,
    tmp_path: Path,
    data: SecopsData,
    posts: list[dict[str, Any]],
    bootstrap: str,
) -> None:
    """Every table against the generator's ground truth, and what was delivered."""
    ws03 = data.assets[3][0]
    # Structured logs: every event in its table, every corrupt line in quarantine.
    for source, table in zip(SOURCES, ("auth_logs", "dhcp_logs", "flow_logs"), strict=True):
        assert read_table(spark, table_path(tmp_path, table)).count() == data.events[source]
        quarantine = read_table(spark, table_path(tmp_path, f"{table}_quarantine"))
        assert quarantine.count() == data.corrupt[source] > 0

    # Attribution: each login once, with the device holding its IP at that moment.
    devices = read_table(spark, table_path(tmp_path, "auth_devices"))
    rows = devices.select("event_id", "mac", "owner", "event_time").collect()
    assert len(rows) == len({r.event_id for r in rows}) == data.events["auth"]
    assert {r.event_id: r.mac for r in rows} == data.holders
    for row in rows:
        if row.mac == ws03:  # owners come from the inventory as the batch saw it
            late = row.event_time.hour >= 9  # chunk 3 starts at 09:00
            assert row.owner == ("user-03b" if late else "user-03"), row

    # Leases: each one the watermark has passed closed once, with why it ended.
    leases = read_table(spark, table_path(tmp_path, "leases")).collect()
    horizon = max(r.event_time for r in read_table(spark, table_path(tmp_path, "dhcp_logs"))
                  .select("event_time").collect()) - timedelta(minutes=5)  # fmt: skip
    closed = [(ip, mac, why) for ip, mac, _, end, why in data.leases
              if end.replace(tzinfo=None) <= horizon]  # fmt: skip
    assert sorted((r.ip, r.mac, r.ended_by) for r in leases) == sorted(closed)
    assert {why for *_, why in closed} == {"expired", "released"}

    # Alerts: every injected incident a rule covers, once; nothing else.
    alerts = read_table(spark, table_path(tmp_path, "alerts")).collect()
    raised = sorted((a.rule, a.entity) for a in alerts)
    expected = sorted((i.rule, i.entity) for i in data.incidents)
    true_positives = len(set(raised) & set(expected))
    precision, recall = true_positives / len(raised), true_positives / len(expected)
    print(f"alerts: precision {precision:.2f}, recall {recall:.2f} over {len(expected)} incidents")
    assert raised == expected
    assert len({a.alert_id for a in alerts}) == len(alerts)

    anomaly = next(a for a in alerts if a.rule == "anomaly")
    current = json.loads(model_path(tmp_path, MODEL_NAME).read_text())
    assert json.loads(anomaly.evidence)["model"] == current["version"]  # picked up mid-stream

    # Delivery: every alert once to the topic (keyed by its id) and to the webhook.
    ids = sorted(a.alert_id for a in alerts)
    records = topic_records(spark, bootstrap, "alerts")
    assert sorted(key for key, _ in records) == ids
    assert sorted(json.loads(value)["alert_id"] for _, value in records) == ids
    assert sorted(post["alert_id"] for post in posts) == ids


def topic_records(spark: SparkSession, bootstrap: str, topic: str) -> list[tuple[str, str]]:
    """Every record of a topic as (key, value) text, read as a batch."""
    register_kafka_source(spark)
    frame = (
        spark.read.format(SOURCE_NAME)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )
    return [(bytes(r.key).decode(), bytes(r.value).decode()) for r in frame.collect()]


def test_a_dead_webhook_never_stops_the_stream_and_its_failures_are_recorded(
    spark: SparkSession, tmp_path: Path
) -> None:
    inbox = tmp_path / "alerts"
    inbox.mkdir()
    (inbox / "a.json").write_text(
        '{"alert_id": "a1", "rule": "r"}\n{"alert_id": "a2", "rule": "r"}\n'
    )
    frame = spark.readStream.schema("alert_id string, rule string").json(str(inbox))
    dead = f"http://127.0.0.1:{free_port()}/hook"
    target = WebhookTarget(dead, timeout_s=0.5, retries=1, deadline_s=5.0)
    undelivered = tmp_path / "undelivered"
    query = start_webhook_stream(frame, name="dead_hook", checkpoint=tmp_path / "checkpoint",
                                 trigger=Trigger("interval", 0.0), target=target,
                                 undelivered=undelivered)  # fmt: skip
    try:
        query.processAllAvailable()
        assert query.isActive and query.exception() is None
    finally:
        query.stop()
    rows = read_table(spark, undelivered).collect()
    assert sorted(json.loads(r.row)["alert_id"] for r in rows) == ["a1", "a2"]
    assert all(r.attempts == 2 and "refused" in r.error and r.batch_id == 0 for r in rows), rows


@pytest.mark.deep
def test_the_demo_raises_each_incident_once_and_train_runs_from_the_cli(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``make demo``: two scheduled catch-ups with a model trained on the lake between
    them; then ``streamsmith train secops-anomaly`` as a user runs it over that lake."""
    printed = io.StringIO()
    figures = run_secops_demo(tmp_path / "demo", devices=20, console=Console(file=printed))
    text = printed.getvalue()
    assert figures["alerts"] == 6 and figures["precision"] == figures["recall"] == 1.0, text
    assert figures["delivered"] == 6  # each alert once on the topic, after the alerts flow
    assert figures["balanced"] == 1.0 and "(ok)" in text
    assert (tmp_path / "demo/reports/secops-2026-11-20.html").is_file()
    assert "198.51.100.9" in text and "(no lease: outside)" in text  # the ad-hoc answer
    # The tutorial says what this run shows: its figures are this run's.
    tutorial = (Path(__file__).parents[2] / "docs/tutorials/security-demo.md").read_text()
    assert f"({figures['precision']:.2f} and {figures['recall']:.2f})" in tutorial
    assert "their precision and recall" in tutorial and "lines = table + quarantine" in tutorial

    result = CliRunner().invoke(cli, ["train", "secops-anomaly", "--root", str(tmp_path / "demo")])
    assert result.exit_code == 0, result.output
    trained = json.loads(model_path(tmp_path / "demo", MODEL_NAME).read_text())
    # Two hours of flows now: about twice the demo's one-hour training set.
    assert trained["trained_on"] > 2 * 100 and f"on {trained['trained_on']} host" in result.output
    empty = CliRunner().invoke(cli, ["train", "secops-anomaly", "--root", str(tmp_path / "none")])
    assert isinstance(empty.exception, UserError)  # the console script exits 2 with it
    assert "table flow_logs does not exist" in str(empty.exception)
