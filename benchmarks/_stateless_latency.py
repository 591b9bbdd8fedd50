"""The stateless rows of ``ysb_latency.py --stateless``: a Kafka -> Kafka filter-and-enrich
flow (YSB's ad events, views kept, each with a tier) run by streamsmith as a user's
spec runs it, in Real-time Mode and in micro-batches, at each rate.

Each event carries its send time (epoch ms), which the flow keeps as the output key. The
output topic stamps each record when the broker appends it (``LogAppendTime``), so a
record's latency is its append time minus its send time: from the producer's call to the
record readable in the output topic, producer and broker on this machine's clock.
Events sent in the first ``warmup`` seconds are left out. Every view sent must come out
(at least once); the run fails otherwise. CPU is the Spark JVM's, in cores (CPU seconds
a wall second) over the measured span; the broker and this process are not counted.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
from confluent_kafka import Consumer, Producer
from pyspark.sql.streaming.query import StreamingQuery

from streamsmith.config import SparkSpec, parse_trigger
from streamsmith.io.kafka.broker import EmbeddedBroker, start_broker
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import Plan, build_plan
from streamsmith.runtime.start import start_queries
from streamsmith.spark.session import build_session

SOURCE, OUTPUT = "ads", "ads-views"
KINDS = ("view", "click", "purchase")
FLOW_SQL = f"""
SELECT CAST(sent AS STRING) AS key,
       to_json(named_struct('ad_id', ad_id, 'user_id', user_id, 'sent', sent,
                            'tier', CASE WHEN user_id < 'u5' THEN 'gold' ELSE 'basic' END)) AS value
FROM {SOURCE}
WHERE event_type = 'view'
"""


@dataclass(frozen=True)
class Row:
    mode: str
    rate: int
    achieved: float  # events/s the producer kept up, after the warm-up
    latencies_ms: list[float]
    cpu_cores: float
    missing: int  # views sent and acknowledged that never came out


def stateless_rows(rates: list[int], triggers: list[str], seconds: int, warmup: int) -> None:
    """Run the flow once per trigger and rate on a fresh broker and print one row each."""
    rows = []
    for trigger in triggers:
        for rate in rates:
            with tempfile.TemporaryDirectory(prefix="streamsmith-bench-stateless-") as tmp:
                rows.append(_run(Path(tmp), trigger, rate, seconds, warmup))
            _print(rows[-1])
    missing = [row for row in rows if row.missing]
    if missing:
        raise SystemExit(f"views lost: {', '.join(f'{r.mode} at {r.rate}/s' for r in missing)}")


def _run(root: Path, trigger: str, rate: int, seconds: int, warmup: int) -> Row:
    with start_broker(root / "broker") as broker:
        broker.create_topic(SOURCE, partitions=1)  # 2 task slots: records, dead letters
        append_time = {"message.timestamp.type": "LogAppendTime"}
        broker.create_topic(OUTPUT, partitions=1, config=append_time)
        spark = build_session(SparkSpec(master="local[2]"), "bench-stateless-latency")
        queries = start_queries(spark, _plan(root, broker, trigger))
        try:
            jvm = spark.sparkContext._jvm
            assert jvm is not None
            pid = int(jvm.java.lang.ProcessHandle.current().pid())
            time.sleep(8)  # let the queries start before the first event is due
            row = _measure(broker, trigger, rate, seconds, warmup, pid)
            _print_batches([query for _, query in queries])
            return row
        finally:
            for _, query in queries:
                query.stop()
            spark.stop()


def _plan(root: Path, broker: EmbeddedBroker, trigger: str) -> Plan:
    document = {
        "name": "adviews",
        "storage_root": str(root / "root"),
        "kafka": {"bootstrap_servers": broker.bootstrap},
        "sources": {
            SOURCE: {
                "format": "kafka",
                "options": {"subscribe": SOURCE, "startingOffsets": "earliest"},
                "schema": "ad_id string, user_id string, event_type string, sent long",
            }
        },
        "flows": {
            "views": {
                "source": SOURCE,
                "sql": FLOW_SQL,
                "sink": {"format": "kafka", "topic": OUTPUT},
            }
        },
    }
    path = root / "streamsmith.yml"
    path.write_text(yaml.safe_dump(document))
    app, spec = load_pipeline(path)
    return build_plan(app, spec, parse_trigger(trigger))


def _measure(
    broker: EmbeddedBroker, trigger: str, rate: int, seconds: int, warmup: int, pid: int
) -> Row:
    appended: list[tuple[int, int]] = []  # (send ms, append ms)
    done = threading.Event()
    reader = threading.Thread(target=_consume, args=(broker.bootstrap, appended, done))
    reader.start()
    start = time.time()
    cpu_from = None
    views = 0
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    failed: list[str] = []

    def on_delivery(error: object, _message: object) -> None:
        if error is not None:
            failed.append(str(error))

    sent = 0
    sent_at_warmup = 0
    while time.time() - start < seconds:
        if cpu_from is None and time.time() - start >= warmup:
            cpu_from = (_jvm_cpu(pid), time.time())
            sent_at_warmup = sent
        due = int((time.time() - start) * rate)
        while sent < due:
            kind = KINDS[sent % 3]
            value = (
                f'{{"ad_id":"a{sent % 1000}","user_id":"u{sent % 10}",'
                f'"event_type":"{kind}","sent":{int(time.time() * 1000)}}}'
            )
            try:
                producer.produce(SOURCE, value=value.encode(), on_delivery=on_delivery)
            except BufferError:  # the producer's queue is full: let it send, then retry
                producer.poll(0.01)
                continue
            sent += 1
            views += kind == "view"
        producer.poll(0)
        time.sleep(0.002)
    assert cpu_from is not None
    span = time.time() - cpu_from[1]
    cpu = (_jvm_cpu(pid) - cpu_from[0]) / span
    achieved = (sent - sent_at_warmup) / span
    if producer.flush(60) or failed:
        raise SystemExit(
            f"{trigger} at {rate}/s: events not delivered to the input topic: {failed[:3]}"
        )
    deadline = time.monotonic() + 90
    while len(appended) < views and time.monotonic() < deadline:
        time.sleep(0.2)  # the output topic catching up; the reader thread polls
    done.set()
    reader.join()
    after = (start + warmup) * 1000
    latencies = sorted(a - s for s, a in appended if s >= after)
    return Row(trigger, rate, achieved, latencies, cpu, max(0, views - len(appended)))


def _consume(bootstrap: str, appended: list[tuple[int, int]], done: threading.Event) -> None:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench", "auto.offset.reset": "earliest",
         "enable.auto.commit": False}
    )  # fmt: skip
    consumer.subscribe([OUTPUT])
    try:
        while not done.is_set():
            for message in consumer.consume(5000, timeout=0.2):
                if message.error() is None:
                    appended.append((int(message.key()), message.timestamp()[1]))
    finally:
        consumer.close()


def _print_batches(queries: list[StreamingQuery]) -> None:
    """Where each query's time went: its batches (a real-time batch lasts its checkpoint
    interval), the rows they read, and the median milliseconds of Spark's phases."""
    for query in queries:
        progress = [p for p in query.recentProgress if p.batchDuration]
        if not progress:
            print(f"  {query.name}: no batch finished")
            continue
        phases = {
            phase: statistics.median(p.durationMs.get(phase, 0) for p in progress)
            for phase in ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")
        }
        print(
            f"  {query.name}: {len(progress)} recent batches, up to "
            f"{max(p.numInputRows for p in progress):,} rows a batch, "
            f"median {statistics.median(p.batchDuration for p in progress):,.0f} ms ("
            + ", ".join(f"{k} {v:,.0f}" for k, v in phases.items())
            + ")"
        )


def _jvm_cpu(pid: int) -> float:
    """CPU seconds (user + system) the process ``pid`` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _print(row: Row) -> None:
    kept = row.latencies_ms
    if not kept:
        raise SystemExit(f"{row.mode} at {row.rate}/s: nothing sent after the warm-up")

    def pct(p: float) -> float:
        return kept[min(len(kept) - 1, int(p * len(kept)))]

    lost = f"  {row.missing:,} VIEWS MISSING" if row.missing else ""
    print(
        f"{row.mode:<16}{row.rate:>8,}/s (sent {row.achieved:>7,.0f}/s)  {len(kept):>9,} views  "
        f"p50 {statistics.median(kept):>7,.0f} ms  p99 {pct(0.99):>7,.0f} ms  "
        f"max {kept[-1]:>7,.0f} ms  cpu {row.cpu_cores:.2f} cores{lost}"
    )
