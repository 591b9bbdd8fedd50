"""The security platform's instant alerting path in Spark's Real-time Mode: each login
from outside the office network, read from a Kafka topic, reaches the alerts topic as
one alert, with the id the stateful rules would give it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from pyspark.sql import SparkSession

from streamsmith.apps import get_app
from streamsmith.config import load_spec
from streamsmith.generate.secops import OUTSIDE_BRUTE_FORCE_IP, OUTSIDE_SPRAY_IP, secops_data
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.monitor.progress import progress_record
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.start import start_flow
from streamsmith.stateful.detection import alert_id
from waiting import read_until, wait_for

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def test_outside_logins_reach_the_alerts_topic_in_real_time(
    spark: SparkSession, tmp_path: Path, broker: EmbeddedBroker, produce_on: object
) -> None:
    data = secops_data(devices=20, chunks=2, seed=3, corrupt_fraction=0.0)
    logins = [json.loads(line) for line in data.lines("auth")]
    outside = [r for r in logins if not r["src_ip"].startswith("10.")]
    assert {r["src_ip"] for r in outside} == {OUTSIDE_BRUTE_FORCE_IP, OUTSIDE_SPRAY_IP}
    # One partition: a real-time query holds a task per partition, and the session has 2.
    broker.create_topic("secops-auth", partitions=1)
    broker.create_topic("instant-alerts", partitions=1)
    broker.create_topic("secops-warm-up", partitions=1)
    produce_on(broker.bootstrap, "secops-auth", data.lines("auth"), partitions=1)  # type: ignore[operator]

    # The documented switch: the auth source on Kafka, the flow on, its trigger real-time.
    app = get_app("secops")
    sets = [
        f"kafka.bootstrap_servers={broker.bootstrap}",
        "sources.auth.format=kafka",
        "sources.auth.path=null",
        "sources.auth.options.subscribe=secops-auth",
        "sources.auth.options.startingOffsets=earliest",
        "flows.outside_logins.enabled=true",
        "flows.outside_logins.trigger=real-time=5s",  # a report every 5 s, not every minute
    ]
    plan = build_plan(app, load_spec(app.default_spec, sets=sets, storage_root=str(tmp_path)))
    flow = next(flow for flow in plan.flows if flow.name == "outside_logins")
    assert [(o.output_mode, str(o.trigger)) for o in flow.outputs] == [("update", "real-time=5s")]
    ((_, query),) = start_flow(spark, plan, flow, list(flow.outputs))
    try:
        records = read_until(broker.bootstrap, ["instant-alerts"], len(outside), 120)
        assert query.isActive and query.exception() is None
        # Logins sent while the query runs are processed as they come, not at a batch:
        # the next checkpoint interval's report says how long each waited.
        backlog = len(data.lines("auth"))

        def read() -> int:
            return sum(report.numInputRows for report in query.recentProgress)

        wait_for(lambda: read() >= backlog, "the backlog's checkpoint report", 60)
        # From a producer already connected: a new one stamps its records when asked to
        # send them, half a second before it has connected and can.
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        producer.produce("secops-warm-up", b"")
        assert producer.flush(30) == 0
        read_before = read()
        for line in data.lines("auth")[:20]:
            producer.produce("secops-auth", line, partition=0)
        assert producer.flush(30) == 0

        def live_report() -> dict[str, Any] | None:
            seen = 0
            for report in query.recentProgress:
                seen += report.numInputRows
                if seen > read_before and report.numInputRows:
                    return progress_record(json.loads(report.json))
            return None

        wait_for(lambda: live_report() is not None, "the live logins' checkpoint report", 60)
        report = live_report()
        assert report is not None
        assert 0 <= report["latency_p50_ms"] <= report["latency_p99_ms"] < 1000, report
    finally:
        query.stop()

    alerts = [json.loads(record.value()) for record in records]
    assert [record.key().decode() for record in records] == [a["alert_id"] for a in alerts]
    by_event = {json.loads(a["evidence"])["event_id"]: a for a in alerts}
    assert sorted(by_event) == sorted(r["event_id"] for r in outside)  # each login once
    for login in outside:
        alert = by_event[login["event_id"]]
        assert alert["rule"] == "outside_login" and alert["entity"] == f"ip:{login['src_ip']}"
        assert alert["severity"] == ("high" if login["result"] == "success" else "medium")
        when = datetime.fromisoformat(login["event_time"].replace("Z", "+00:00"))
        ms = (when - EPOCH) // timedelta(milliseconds=1)
        assert alert["alert_id"] == alert_id("outside_login", alert["entity"], ms)
