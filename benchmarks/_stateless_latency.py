"""The stateless rows of ``ysb_latency.py --stateless``: a Kafka -> Kafka filter-and-enrich
flow (YSB's ad events, views kept, each with a tier) run by streamsmith as a user's
spec runs it, in Real-time Mode and in micro-batches, at each rate; the same SQL as a
plain PySpark query on Spark's own Kafka source and sink (a trigger after ``bare-``, e.g.
``bare-real-time=5s``: what Spark itself pays, without the flow's dead letters, reasons
and counts); and the peer row (trigger ``pyflink``): the same flow in PyFlink SQL with
Flink's Kafka connector (``peers/pyflink_stateless.py`` in ``.venv-flink``), on the same
broker setup and rate. Each row runs in a process of its own: a fresh JVM, cold as a
user's run starts.

Before the first event, a probe view (send time 0, left out of every figure) must come
out of the output topic: the flow reads and writes when measuring starts.

Each event carries its send time (epoch ms), which the flow keeps as the output key. The
output topic stamps each record when the broker appends it (``LogAppendTime``), so a
record's latency is its append time minus its send time: from the producer's call to the
record readable in the output topic, producer and broker on this machine's clock.
Events sent in the first ``warmup`` seconds are left out. Every view sent must come out
(at least once); the run fails otherwise. CPU is the engine's process tree's, in cores
(CPU seconds a wall second) over the measured span: the Spark JVM (and any process it
forks), or PyFlink's Python client and its JVM (Flink's local cluster); the broker and
this process (the producer, the reader, Spark's Python driver) are not counted.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import yaml
from _latency_trace import Traced, percentile, print_trace
from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from streamsmith.config import SparkSpec, parse_trigger
from streamsmith.io.kafka.broker import EmbeddedBroker, start_broker
from streamsmith.io.kafka.login import jvm_login, librdkafka_login
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import Plan, build_plan
from streamsmith.runtime.start import start_queries
from streamsmith.spark.session import build_session

SOURCE, OUTPUT = "ads", "ads-views"
PYFLINK = "pyflink"  # the peer row's name among the triggers
BARE = "bare-"  # before a trigger: the same SQL as a plain query on Spark's own connector
HERE = Path(__file__).resolve().parent
FLINK_PYTHON = HERE.parent / ".venv-flink" / "bin" / "python"
FLINK_JARS = HERE.parent / ".venv-flink" / "jars"  # make peers-flink puts the connector here
KINDS = ("view", "click", "purchase")
# The key carries the send time and, after a colon, the event's sequence number: after the
# run, the input topic (which stamps ``LogAppendTime``) says when each event was appended
# there, and the trace splits each record's wait at that point.
FLOW_SQL = f"""
SELECT CONCAT(CAST(sent AS STRING), ':', CAST(seq AS STRING)) AS key,
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
    traced: list[Traced]  # the records behind latencies_ms, for the trace
    batch_starts: list[int]  # epoch ms the flow's batches started (Spark's rows)
    gc_ms: float  # the JVM's garbage collection time over the measured span (Spark's rows)
    cpu_cores: float
    missing: int  # views sent and acknowledged that never came out


def stateless_rows(rates: list[int], triggers: list[str], seconds: int, warmup: int) -> None:
    """Run the flow once per trigger (or the peer) and rate on a fresh broker and print one
    row each."""
    rows = []
    for trigger in triggers:
        if trigger == PYFLINK and (lacking := _pyflink_missing()):
            print(f"{PYFLINK}: {lacking} (`make peers-flink`); left out")
            continue
        for rate in rates:
            rows.append(_cold_run(trigger, rate, seconds, warmup))
            _print(rows[-1])
    missing = [row for row in rows if row.missing]
    if missing:
        raise SystemExit(f"views lost: {', '.join(f'{r.mode} at {r.rate}/s' for r in missing)}")


@dataclass(frozen=True)
class Engine:
    """What the measuring needs of a running flow, Spark's or the peer's."""

    pid: int  # the root of its process tree, whose CPU is counted
    failure: Callable[[], str | None]  # why the flow stopped, or None while it runs
    batch_starts: Callable[[], list[int]] = list  # epoch ms of its recent batches' starts
    gc_ms: Callable[[], float] = lambda: float("nan")  # its JVM's total GC time so far


def _cold_run(trigger: str, rate: int, seconds: int, warmup: int) -> Row:
    """One row in a process of its own: PySpark keeps its JVM for the life of the Python
    process, so a row run after another would start with the earlier row's compiled
    code, and plan its first checkpoints faster than a fresh run of it would."""
    spawn = multiprocessing.get_context("spawn")
    with (
        tempfile.TemporaryDirectory(prefix="streamsmith-bench-stateless-") as tmp,
        ProcessPoolExecutor(1, mp_context=spawn) as pool,
    ):
        return pool.submit(_run, Path(tmp), trigger, rate, seconds, warmup).result()


def _run(root: Path, trigger: str, rate: int, seconds: int, warmup: int) -> Row:
    with start_broker(root / "broker") as broker:
        append_time = {"message.timestamp.type": "LogAppendTime"}
        # 2 task slots: the real-time task, and the dead letters' micro-batches
        broker.create_topic(SOURCE, partitions=1, config=append_time)
        broker.create_topic(OUTPUT, partitions=1, config=append_time)
        flow = _pyflink(root, broker) if trigger == PYFLINK else _spark(root, broker, trigger)
        with flow as engine:
            _await_output(broker, engine, trigger)
            return _measure(broker, trigger, rate, seconds, warmup, engine)


@contextmanager
def _spark(root: Path, broker: EmbeddedBroker, trigger: str) -> Iterator[Engine]:
    spark = build_session(SparkSpec(master="local[2]"), "bench-stateless-latency")
    if trigger.startswith(BARE):
        queries = [_bare(spark, root, broker, trigger.removeprefix(BARE))]
        timed = queries
    else:
        started = start_queries(spark, _plan(root, broker, trigger))
        queries = [query for _, query in started]
        # The flow's own query; a real-time flow's quarantine query writes its dead
        # letters in micro-batches of its own.
        timed = [query for output, query in started if output.role == "main"]
    try:
        jvm = spark.sparkContext._jvm
        assert jvm is not None

        def failure() -> str | None:
            return next((f"{q.name}: {q.exception()}" for q in queries if q.exception()), None)

        def batch_starts() -> list[int]:
            return [_epoch_ms(p.timestamp) for q in timed for p in q.recentProgress]

        def gc_ms() -> float:
            beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
            return float(sum(bean.getCollectionTime() for bean in beans))

        pid = int(jvm.java.lang.ProcessHandle.current().pid())
        yield Engine(pid, failure, batch_starts, gc_ms)
        _print_batches(queries)
    finally:
        for query in reversed(queries):  # the dead letters' query waits on the flow's
            query.stop()
        spark.stop()


def _pyflink_missing() -> str | None:
    """What the peer row lacks on this machine, if anything."""
    if not FLINK_PYTHON.exists():
        return f"{FLINK_PYTHON} is missing"
    if not any(FLINK_JARS.glob("*.jar")):
        return f"no Kafka connector jar in {FLINK_JARS}"
    return None


@contextmanager
def _pyflink(root: Path, broker: EmbeddedBroker) -> Iterator[Engine]:
    """``peers/pyflink_stateless.py`` in ``.venv-flink``, in a session of its own (its
    Python client and the JVM it starts); stopped by SIGTERM (it cancels its job).

    The broker takes SASL/PLAIN only: the peer gets the login Spark's connector would
    (security.protocol, sasl.mechanism, sasl.jaas.config) as JSON on its stdin, not in
    its arguments (``ps`` shows those)."""
    log = root / "pyflink.log"
    command = [str(FLINK_PYTHON), str(HERE / "peers" / "pyflink_stateless.py"),
               broker.bootstrap, SOURCE, OUTPUT]  # fmt: skip
    login = {
        key.removeprefix("kafka."): value
        for key, value in jvm_login({"kafka.bootstrap.servers": broker.bootstrap}).items()
        if key != "kafka.bootstrap.servers"
    }
    with log.open("w") as out:
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    assert process.stdin is not None
    process.stdin.write(json.dumps(login).encode())
    process.stdin.close()

    def failure() -> str | None:
        if process.poll() is None:
            return None
        return f"exited with {process.returncode}: {log.read_text()[-2000:]}"

    try:
        yield Engine(process.pid, failure)
    finally:
        _end_session(process)


def _end_session(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the client, then wait for its session to end (PyFlink's JVM exits when
    its client's pipe closes); kill whatever of it is left after a minute."""
    process.terminate()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        process.poll()  # reaps the client: a zombie would still count as in the session
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return  # every process of the session has ended
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _await_output(broker: EmbeddedBroker, engine: Engine, trigger: str) -> None:
    """Wait until the flow turns a probe view (sent 0, left out of every figure) into an
    output record: the flow is reading and writing before the first measured event."""
    producer = Producer(librdkafka_login({"bootstrap.servers": broker.bootstrap}))
    probe = '{"ad_id":"a0","user_id":"u0","event_type":"view","sent":0,"seq":0}'
    producer.produce(SOURCE, value=probe.encode())
    if producer.flush(30):
        raise SystemExit(f"{trigger}: the probe event was not delivered to {SOURCE}")
    consumer = Consumer(
        librdkafka_login(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "ready",
                "auto.offset.reset": "earliest",
            }
        )
    )
    consumer.subscribe([OUTPUT])
    deadline = time.monotonic() + 240
    try:
        while True:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                return
            if (why := engine.failure()) is not None:
                raise SystemExit(f"{trigger} stopped before its first output: {why}")
            if time.monotonic() > deadline:
                raise SystemExit(f"{trigger}: no output in {OUTPUT} 240 s after the probe")
    finally:
        consumer.close()


def _bare(spark: SparkSession, root: Path, broker: EmbeddedBroker, trigger: str) -> StreamingQuery:
    """The flow as a plain PySpark query: Spark's Kafka source and sink, ``from_json`` and
    the same SQL, no dead letters, no quarantine, no event log: the floor of what Spark
    itself pays at the same trigger."""
    login = jvm_login({"kafka.bootstrap.servers": broker.bootstrap})
    schema = "ad_id string, user_id string, event_type string, sent long, seq long"
    events = (
        spark.readStream.format("kafka").options(**login)
        .option("subscribe", SOURCE).option("startingOffsets", "earliest").load()
        .select(F.from_json(F.col("value").cast("string"), schema).alias("e")).select("e.*")
    )  # fmt: skip
    events.createOrReplaceTempView(SOURCE)
    writer = (
        spark.sql(FLOW_SQL).writeStream.format("kafka").options(**login)
        .option("topic", OUTPUT).option("checkpointLocation", str(root / "bare-checkpoint"))
        .queryName("bare").outputMode("update")  # Spark's only mode in Real-time Mode
    )  # fmt: skip
    return writer.trigger(**parse_trigger(trigger).spark_kwargs()).start()


def _plan(root: Path, broker: EmbeddedBroker, trigger: str) -> Plan:
    document = {
        "name": "adviews",
        "storage_root": str(root / "root"),
        "kafka": {"bootstrap_servers": broker.bootstrap},
        "sources": {
            SOURCE: {
                "format": "kafka",
                "options": {"subscribe": SOURCE, "startingOffsets": "earliest"},
                "schema": "ad_id string, user_id string, event_type string, sent long, seq long",
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
    broker: EmbeddedBroker, trigger: str, rate: int, seconds: int, warmup: int, engine: Engine
) -> Row:
    pid = engine.pid
    appended: list[tuple[int, int, int]] = []  # (send ms, sequence number, append ms)
    done = threading.Event()
    reader = threading.Thread(target=_consume, args=(broker.bootstrap, appended, done))
    reader.start()
    start = time.time()
    cpu_from = None
    views = 0
    producer = Producer(librdkafka_login({"bootstrap.servers": broker.bootstrap, "linger.ms": 5}))
    failed: list[str] = []

    def on_delivery(error: object, _message: object) -> None:
        if error is not None:
            failed.append(str(error))

    sent = 0
    sent_at_warmup = 0
    gc_from = 0.0
    while time.time() - start < seconds:
        if cpu_from is None and time.time() - start >= warmup:
            cpu_from = (_tree_cpu(pid), time.time())
            gc_from = engine.gc_ms()
            sent_at_warmup = sent
        due = int((time.time() - start) * rate)
        while sent < due:
            kind = KINDS[sent % 3]
            value = (
                f'{{"ad_id":"a{sent % 1000}","user_id":"u{sent % 10}",'
                f'"event_type":"{kind}","sent":{int(time.time() * 1000)},"seq":{sent + 1}}}'
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
    cpu = (_tree_cpu(pid) - cpu_from[0]) / span
    gc_ms = engine.gc_ms() - gc_from
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
    read = _append_times(broker.bootstrap)
    kept = sorted((Traced(sent, read.get(seq), out) for sent, seq, out in appended
                   if sent >= after), key=lambda r: r.sent)  # fmt: skip
    latencies = sorted(float(r.out - r.sent) for r in kept)
    return Row(trigger, rate, achieved, latencies, kept, engine.batch_starts(), gc_ms, cpu,
               max(0, views - len(appended)))  # fmt: skip


def _consume(bootstrap: str, appended: list[tuple[int, int, int]], done: threading.Event) -> None:
    consumer = Consumer(
        librdkafka_login(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "bench",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
    )
    consumer.subscribe([OUTPUT])
    try:
        while not done.is_set():
            for message in consumer.consume(5000, timeout=0.2):
                if message.error() is not None:
                    continue
                sent, _, seq = (message.key() or b"0:0").partition(b":")
                if int(sent):  # not the probe (sent 0)
                    appended.append((int(sent), int(seq), message.timestamp()[1]))
    finally:
        consumer.close()


def _append_times(bootstrap: str) -> dict[int, int]:
    """Each event's append time in the input topic, by sequence number: read after the
    run, so the reading costs the measured flow nothing."""
    consumer = Consumer(
        librdkafka_login(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "trace",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
    )
    _, end = consumer.get_watermark_offsets(TopicPartition(SOURCE, 0), timeout=30)
    consumer.assign([TopicPartition(SOURCE, 0, 0)])
    times: dict[int, int] = {}
    try:
        offset, deadline = -1, time.monotonic() + 300
        while offset < end - 1 and time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=1):
                if message.error() is not None:
                    continue
                offset = message.offset() or offset
                value = message.value() or b""
                at = value.rfind(b'"seq":')
                times[int(value[at + 6 : value.index(b"}", at)])] = message.timestamp()[1]
    finally:
        consumer.close()
    return times


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


def _tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) used by ``pid`` and every process under it now."""
    parent, ticks = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue  # the process ended while /proc was listed
        child = int(stat.parent.name)
        parent[child] = int(fields[1])
        ticks[child] = int(fields[11]) + int(fields[12])
    tree, grew = {pid}, True
    while grew:
        under = {child for child, up in parent.items() if up in tree} - tree
        tree |= under
        grew = bool(under)
    return sum(ticks.get(member, 0) for member in tree) / os.sysconf("SC_CLK_TCK")


def _print(row: Row) -> None:
    kept = row.latencies_ms
    if not kept:
        raise SystemExit(f"{row.mode} at {row.rate}/s: nothing sent after the warm-up")

    lost = f"  {row.missing:,} VIEWS MISSING" if row.missing else ""
    print(
        f"{row.mode:<16}{row.rate:>8,}/s (sent {row.achieved:>7,.0f}/s)  {len(kept):>9,} views  "
        f"p50 {statistics.median(kept):>7,.0f} ms  p99 {percentile(kept, 0.99):>7,.0f} ms  "
        f"max {kept[-1]:>7,.0f} ms  cpu {row.cpu_cores:.2f} cores{lost}"
    )
    print_trace(row.traced, row.batch_starts, row.gc_ms)


def _epoch_ms(timestamp: str) -> int:
    """A progress report's ``timestamp`` (ISO 8601, UTC) as epoch milliseconds."""
    return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)
