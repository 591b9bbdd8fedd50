"""Prefix integrity, checked: a streaming flow's output equals a batch job over its input.

The seeds' central promise is that at any time the output of a streaming query equals
what a batch job would compute over a prefix of the input. :func:`check_prefix_integrity`
tests it for any app flow with a file source: it cuts the input into random chunks, feeds
them to the streaming query one micro-batch at a time (optionally restarting the query
from its checkpoint between chunks), then compares the sink's final content with
``streamsmith backfill`` of the same flow over the same input.

What "the same" means per output mode:

- update and complete: the final result table equals the batch result;
- append with a watermark: the rows equal the batch rows whose window has closed, i.e.
  ended at or before the final watermark (max event time minus the delay).

A batch job has no watermark, so it never drops late events; a stream does, and records
them in ``<table>_late``. Result rows those events would have changed are left out of
the comparison on both sides and counted in the report (``excluded``): the late table
explains them. Inputs whose disorder stays within the watermark delay drop nothing, and
then every row is compared.

Use it from pytest with a SparkSession (shuffle partitions 2 keep it quick)::

    report = check_prefix_integrity(spark, get_app("signals"), "signal_windows", lines,
                                    root=tmp_path, splits=10)
    report.assert_ok()
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import DoubleType, FloatType, StructType

from streamsmith.config import ConfValue, Trigger, load_spec, parse_duration
from streamsmith.io.lake import read_table, write_table
from streamsmith.io.postgres.sink import servable
from streamsmith.io.schema_store import latest
from streamsmith.io.schema_store import record as record_version
from streamsmith.runtime.app import App, EventTime
from streamsmith.runtime.flow_batches import MainQueryBehind
from streamsmith.runtime.frames import FlowFrames, flow_frames, output_frame
from streamsmith.runtime.outputs import Output
from streamsmith.runtime.plan import FlowPlan, Plan, build_plan
from streamsmith.runtime.schema_change import add_new_fields, error_text
from streamsmith.runtime.start import start_flow, start_queries
from streamsmith.transforms.events import WINDOW_END, WINDOW_START, RecordParser
from streamsmith.transforms.multiset import multiset_difference
from streamsmith.transforms.quarantine import REJECT_REASON, accepted

__all__ = [
    "ChunkRunner",
    "FlowResult",
    "IntegrityReport",
    "check_prefix_integrity",
    "local_broker",
    "local_session",
    "random_chunks",
]

_DIGITS = 9  # doubles (averages) are compared to 9 decimals: sums in another order differ


@dataclass(frozen=True)
class FlowResult:
    """One sink of a flow in one random split: what the comparison found (``flow`` is
    ``<flow>.<sink>`` for a flow's named ``sinks``)."""

    flow: str
    seed: int
    chunk_sizes: tuple[int, ...]
    compared_rows: int
    excluded_rows: int
    missing: tuple[str, ...]  # in the batch result, not in the sink
    unexpected: tuple[str, ...]  # in the sink, not in the batch result

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unexpected


@dataclass
class IntegrityReport:
    """Every flow of every split."""

    app: str
    results: list[FlowResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(result.ok for result in self.results)

    @property
    def splits(self) -> int:
        return len({result.seed for result in self.results})

    def assert_ok(self) -> None:
        """Fail with the first differing rows of every failed flow and split."""
        failures = [
            f"{r.flow}, split seed={r.seed} chunks={list(r.chunk_sizes)}: "
            f"missing {list(r.missing[:5])}, unexpected {list(r.unexpected[:5])}"
            for r in self.results
            if not r.ok
        ]
        if failures:
            raise AssertionError(
                f"app {self.app} broke prefix integrity in {len(failures)} of "
                f"{len(self.results)} flow runs:\n" + "\n".join(failures)
            )


# Spark settings for tests over a few records, where Spark's fixed costs dominate; none
# changes a result. Measured on a project's prefix-integrity test (17 records, 4 queries):
# 242 CPU-seconds with Spark's defaults, 107 with these.
SMALL_DATA_CONF: dict[str, str] = {
    # A query at `interval=0s` with nothing new polls its source again after this long
    # (Spark's default, 10 ms, lists a file source's folder ~50 times a second, each
    # listing scanning every jar on the classpath for a Hadoop JobConf).
    "spark.sql.streaming.pollingDelay": "200ms",
    # No Java generated and compiled for each plan's whole stages: on a handful of rows
    # the compiler costs far more than it saves. (Spark's `codegen.factoryMode` would
    # interpret single expressions too, but only in Spark's own test mode, whose extra
    # checks cost more than that saves.)
    "spark.sql.codegen.wholeStage": "false",
    # Delta rebuilds a table's state for each MERGE and read of a new version; for tables
    # of a few files one task per stage does it with less overhead than two
    # (`benchmarks/delta_snapshot_partitions.py --setting`). streamsmith's own conf keeps
    # two in the tests' subprocess JVMs, which get this as a system property.
    "spark.databricks.delta.snapshotPartitions": "1",
}


# A test session's JVM runs a few minutes of very varied Spark code: with the JVM's own
# thresholds, its server compiler (C2) spent a large share of the CPU of a shared test
# session's whole run (and most of it in the first minutes) compiling methods run a few
# thousand times. Ten times the thresholds compiles only what is really hot; the
# throughput collector costs less CPU than G1 on a heap that lives minutes. Three test
# modules with two workers took 0.82 of the time with these options than with the JVM's
# defaults (`benchmarks/session_jvm.py`, figures in docs/development.md).
TEST_JVM_OPTIONS = " ".join(
    [
        "-XX:Tier4InvocationThreshold=50000",
        "-XX:Tier4MinInvocationThreshold=6000",
        "-XX:Tier4CompileThreshold=150000",
        "-XX:Tier4BackEdgeThreshold=400000",
        "-XX:+UseParallelGC",
    ]
)


def local_session(cores: int = 2, name: str = "streamsmith-tests") -> SparkSession:
    """A local Spark session for tests: ``cores`` cores, as many shuffle partitions
    (Spark's 200 would make every small aggregation slow), UTC, bound to loopback,
    :data:`SMALL_DATA_CONF` and the JVM's :data:`TEST_JVM_OPTIONS`. Start one per test
    run: it takes seconds."""
    from streamsmith.config import SparkSpec
    from streamsmith.spark.session import build_session

    conf: dict[str, str | int | float | bool] = {
        "spark.sql.shuffle.partitions": cores,
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": TEST_JVM_OPTIONS,
        **SMALL_DATA_CONF,
    }
    return build_session(SparkSpec(master=f"local[{cores}]", conf=conf), name)


@contextmanager
def local_broker(folder: Path) -> Iterator[str]:
    """An Apache Kafka broker for tests (one KRaft node on 127.0.0.1, its data and log in
    ``folder``): yields its bootstrap servers, and stops it on exit. It authenticates, as
    ``broker start``'s does: streamsmith's clients log in by themselves; a client of the
    test's own passes its settings through ``streamsmith.io.kafka.login.librdkafka_login``."""
    from streamsmith.io.kafka.broker import start_broker

    with start_broker(folder) as broker:
        yield broker.bootstrap


def random_chunks(
    records: Sequence[bytes], rng: random.Random, max_chunks: int
) -> list[list[bytes]]:
    """``records`` in delivery order, cut at random places into 1..max_chunks chunks."""
    count = rng.randint(1, max(1, min(max_chunks, len(records))))
    cuts = sorted(rng.sample(range(1, len(records)), count - 1)) if count > 1 else []
    bounds = [0, *cuts, len(records)]
    return [list(records[start:end]) for start, end in pairwise(bounds)]


def check_prefix_integrity(
    spark: SparkSession,
    app: App,
    records: Sequence[bytes],
    *,
    root: Path,
    flows: Sequence[str] | None = None,
    splits: int = 10,
    seed: int = 0,
    max_chunks: int = 5,
    restart_every: int | None = None,
    sets: Sequence[str] = (),
    bootstrap: str | None = None,
    prepare_root: Callable[[Path], None] | None = None,
) -> IntegrityReport:
    """Feed ``records`` to an app's flows in random chunks, ``splits`` times, and compare
    what each sink of each flow holds at the end with the backfill of the same input.

    ``records`` are the input of the flows' (shared) file source in delivery order: lines
    for ``jsonl``, ``csv`` and ``text`` sources, whole documents for ``json`` ones.
    ``flows`` defaults to every flow of the app. Each split runs under its own storage
    root below ``root`` (and its own PostgreSQL schema); ``restart_every`` stops and
    restarts the queries from their checkpoints every that many chunks; ``sets`` are
    spec overrides.

    For a Kafka source, pass the broker's ``bootstrap`` servers: each split produces its
    chunks to a fresh topic (and writes Kafka sinks to fresh topics, read back as the
    newest value per key). ``prepare_root`` is called with each split's storage root
    before its queries start, e.g. to write the lookup tables the flows join with.

    A source whose schema evolves (``schema: infer``) starts each split from the schema
    the app was loaded with and grows it as the supervisor does: a query that meets a
    new field stops, the split stores a version with it, and the query runs the batch
    again; the backfill then reads everything under the final version.
    """
    chosen = list(flows or (flow.name for flow in app.flows))
    report = IntegrityReport(app.name)
    for index in range(splits):
        split_seed = seed * 1000 + index
        chunks = random_chunks(records, random.Random(split_seed), max_chunks)
        split_root = root / f"split-{index:03d}"
        plan = _plan(app, chosen, split_root, index, sets, _kafka_topics(app, index, bootstrap))
        if prepare_root is not None:
            prepare_root(split_root)
        # The flows are checked once: each split's plan differs in its paths only.
        checked = index == 0
        report.results.extend(
            _run_split(spark, plan, chunks, split_seed, restart_every, check=checked)
        )
    return report


def _kafka_topics(app: App, index: int, bootstrap: str | None) -> dict[str, Any]:
    """Fresh topics for this split: every Kafka source and sink gets a suffixed name."""
    if bootstrap is None:
        return {}
    suffix = f"-split-{index:03d}"
    sources = {
        name: {"options": {"subscribe": source["options"]["subscribe"] + suffix}}
        for name, source in app.default_spec["sources"].items()
        if source.get("format") == "kafka"
    }
    flows: dict[str, Any] = {}
    for name, flow in app.default_spec["flows"].items():
        if (flow.get("sink") or {}).get("format") == "kafka":
            flows[name] = {"sink": {"topic": flow["sink"]["topic"] + suffix}}
        named = {
            key: {"topic": sink["topic"] + suffix}
            for key, sink in (flow.get("sinks") or {}).items()
            if sink.get("format") == "kafka"
        }
        if named:
            flows[name] = {"sinks": named}
    return {"kafka": {"bootstrap_servers": bootstrap}, "sources": sources, "flows": flows}


def _plan(
    app: App,
    flows: Sequence[str],
    root: Path,
    index: int,
    sets: Sequence[str],
    topics: Mapping[str, Any],
) -> Plan:
    disabled = {name: {"enabled": False} for name in app.default_spec["flows"] if name not in flows}
    overrides = {
        "flows": {**disabled, **topics.get("flows", {})},
        "postgres": {"db_schema": f"integrity_{index:03d}"},
        **{key: value for key, value in topics.items() if key != "flows"},
    }
    spec = load_spec(app.default_spec, sets=sets, overrides=overrides, storage_root=str(root))
    return build_plan(app, spec, Trigger("interval", 0.0))


class ChunkRunner:
    """An app's queries, fed one chunk of input at a time, one micro-batch per chunk.

    ``send(chunk)`` delivers the chunk (a file, or messages to the source topic) and
    returns once every query has processed it; ``restart()`` stops the queries and starts
    them again from their checkpoints. Use it as a context manager. ``check=False``
    skips the analysis of the flows before their queries start (done for the same flows
    before).
    """

    def __init__(self, spark: SparkSession, plan: Plan, *, check: bool = True) -> None:
        self.spark = spark
        self.plan = plan
        self._send = _feed(plan)
        self.sent = 0
        for flow in plan.flows:
            _first_version(flow)
        self.queries = start_queries(spark, plan, check=check)

    def send(self, chunk: Sequence[bytes]) -> None:
        """Deliver ``chunk`` and wait until every query has processed it. A query that
        stops at a field its evolving schema lacks is handled as the supervisor handles
        it: a new schema version, and the query started again to rerun the batch."""
        self._send(self.sent, chunk)
        self.sent += 1
        index = 0
        waits = 0
        while index < len(self.queries):
            output, query = self.queries[index]
            try:
                query.processAllAvailable()
            except StreamingQueryException as exc:
                flow = next(flow for flow in self.plan.flows if output in flow.outputs)
                error = error_text(exc)
                if MainQueryBehind.__name__ in error and waits < len(self.queries):
                    # A side query stopped, uncommitted, at a batch its main query had
                    # not committed (the main query stopped at a new field): started
                    # again, as the supervisor does, it runs that batch now.
                    waits += 1
                    ((_, restarted),) = start_flow(self.spark, self.plan, flow, [output])
                    self.queries[index] = (output, restarted)
                    continue
                if flow.schema_store is None or add_new_fields(flow.schema_store, error) is None:
                    raise
                ((_, restarted),) = start_flow(self.spark, self.plan, flow, [output])
                self.queries[index] = (output, restarted)
                continue  # the same query again, on the new version
            index += 1

    def query(self, name: str) -> StreamingQuery:
        """The running query called ``name`` (e.g. ``signals.signal_windows``)."""
        return next(query for output, query in self.queries if output.query_name == name)

    def restart(self) -> None:
        self.stop()
        self.queries = start_queries(self.spark, self.plan, check=False)

    def stop(self) -> None:
        for _, query in self.queries:
            query.stop()

    def __enter__(self) -> ChunkRunner:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def _first_version(flow: FlowPlan) -> None:
    """A split's own schema store starts where the pipeline's did: with the schema the
    flow's parser was loaded with, as version 0, so each split evolves it anew."""
    parser = flow.definition.prepare
    if flow.schema_store is None or latest(flow.schema_store) is not None:
        return
    if isinstance(parser, RecordParser):
        record_version(flow.schema_store, parser.schema, "the pipeline's schema as loaded")


def _run_split(
    spark: SparkSession,
    plan: Plan,
    chunks: Sequence[Sequence[bytes]],
    split_seed: int,
    restart_every: int | None,
    *,
    check: bool,
) -> list[FlowResult]:
    with ChunkRunner(spark, plan, check=check) as runner:
        for number, chunk in enumerate(chunks):
            runner.send(chunk)
            if restart_every and (number + 1) % restart_every == 0 and number + 1 < len(chunks):
                runner.restart()
        sinks = [(flow, output) for flow in plan.flows for output in _sinks(flow)]
        streamed = [_sink_content(spark, plan, flow, output) for flow, output in sinks]
        # Each split has its own input files, whose paths some outputs hold: a batch
        # result per split.
        return [
            _compare(
                spark,
                plan,
                flow,
                output,
                content,
                _batch_result(spark, plan, flow, output),
                chunks,
                split_seed,
            )
            for (flow, output), content in zip(sinks, streamed, strict=True)
        ]


def _sinks(flow: FlowPlan) -> list[Output]:
    """The flow's sinks: its one ``sink``, or each of its ``sinks``."""
    return [output for output in flow.outputs if output.role in ("main", "sink")]


def _batch_result(spark: SparkSession, plan: Plan, flow: FlowPlan, output: Output) -> DataFrame:
    """The flow's backfill over the same input, as the sink ``output`` would hold it (for
    append mode over windows, the windows the stream has closed)."""
    frames = flow_frames(spark, flow, plan.root, streaming=False)
    # Materialised first: comparing two deep plans makes Spark's optimizer run out of heap.
    write_table(
        servable(output_frame(frames, output)), output.backfill_path, table_format="parquet"
    )
    expected = _normalise(read_table(spark, output.backfill_path))
    if output.kind == "topic":
        expected = expected.select(*(F.col(c).cast("string") for c in ("key", "value")))
    rule = flow.definition.event_time
    if output.output_mode == "append" and flow.definition.stateful and rule is not None:
        expected = _closed_windows(frames, rule, expected)
    return expected


def _compare(
    spark: SparkSession,
    plan: Plan,
    flow: FlowPlan,
    output: Output,
    streamed: DataFrame,
    expected: DataFrame,
    chunks: Sequence[Sequence[bytes]],
    split_seed: int,
) -> FlowResult:
    """A sink's content against the backfill of the same flow (memory tables are read
    before the queries stop, the backfill after)."""
    rule = flow.definition.event_time
    # The late events of this rule, recorded by whichever flow over the same events does.
    late = next(
        (
            output
            for other in plan.flows
            if other.definition.event_time == rule
            and other.definition.prepare == flow.definition.prepare
            for output in other.outputs
            if output.kind == "late"
        ),
        None,
    )
    touched = _touched(spark, late, rule, expected) if late is not None and rule else None
    streamed = servable(streamed).select(*expected.columns)  # nested columns as JSON, as expected
    difference = multiset_difference(expected, streamed, touched)
    return FlowResult(
        flow=flow.name if output.name is None else f"{flow.name}.{output.name}",
        seed=split_seed,
        chunk_sizes=tuple(len(chunk) for chunk in chunks),
        compared_rows=difference.compared,
        excluded_rows=difference.excluded,
        missing=difference.missing,
        unexpected=difference.unexpected,
    )


Feed = Callable[[int, Sequence[bytes]], None]


def _feed(plan: Plan) -> Feed:
    """How chunks reach the flows' shared source: files, or a Kafka topic."""
    sources = {(flow.source_name, flow.source_path) for flow in plan.flows}
    if len(sources) != 1:
        raise ValueError(f"the harness feeds one shared source; these flows read {sources}")
    ((_, folder),) = sources
    spec = plan.flows[0].source
    if folder is None:
        return _kafka_feed(spec.options)
    folder.mkdir(parents=True, exist_ok=True)
    document = spec.format == "json"

    def write(number: int, chunk: Sequence[bytes]) -> None:
        """One file per chunk of lines, or one file per document; written atomically."""
        files = (
            [(f"chunk-{number:05d}-{i:05d}.json", record) for i, record in enumerate(chunk)]
            if document
            else [(f"chunk-{number:05d}.json", b"".join(r.rstrip(b"\n") + b"\n" for r in chunk))]
        )
        for file_name, content in files:
            staging = folder / f".{file_name}"
            staging.write_bytes(content)
            staging.replace(folder / file_name)

    return write


def _kafka_feed(options: Mapping[str, ConfValue]) -> Feed:
    from confluent_kafka import Producer

    from streamsmith.io.kafka.client import ensure_topic
    from streamsmith.io.kafka.login import librdkafka_login

    bootstrap = str(options["kafka.bootstrap.servers"])
    topic = str(options["subscribe"])
    ensure_topic(bootstrap, topic, 3)

    def produce(number: int, chunk: Sequence[bytes]) -> None:
        producer = Producer(
            librdkafka_login({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        )
        failures: list[str] = []
        for index, record in enumerate(chunk):
            producer.produce(
                topic,
                value=record,
                partition=index % 3,
                on_delivery=lambda error, _m: failures.append(str(error)) if error else None,
            )
        if producer.flush(30) or failures:
            raise RuntimeError(f"chunk {number} not delivered to {topic}: {failures[:3]}")

    return produce


def _sink_content(spark: SparkSession, plan: Plan, flow: FlowPlan, output: Output) -> DataFrame:
    """The final content of one of the flow's sinks as a DataFrame (a topic: its newest
    value per key, as strings)."""
    if output.kind == "memory" and output.output_mode == "update":
        raise ValueError("a memory sink in update mode keeps every version of a row")

    def schema() -> StructType:
        batch = output_frame(flow_frames(spark, flow, plan.root, streaming=False), output)
        return servable(batch).schema

    return _normalise(output.sink.read_back(spark, schema))


def _normalise(frame: DataFrame) -> DataFrame:
    """Round floating-point columns so sums added in another order compare equal."""
    return frame.select(
        *(
            F.round(F.col(f.name), _DIGITS).alias(f.name)
            if isinstance(f.dataType, DoubleType | FloatType)
            else F.col(f.name)
            for f in frame.schema.fields
        )
    )


def _closed_windows(frames: FlowFrames, rule: EventTime, expected: DataFrame) -> DataFrame:
    """Batch rows whose window ended by the final watermark: what append mode emits."""
    if WINDOW_END not in expected.columns:
        return expected
    events = frames.tagged if frames.tagged is not None else frames.output
    if REJECT_REASON in events.columns:
        events = accepted(events)
    row = events.agg(F.max(rule.column)).first()
    latest = row[0] if row else None
    if not isinstance(latest, datetime):
        return expected.limit(0)
    watermark_us = int((latest.timestamp() - parse_duration(rule.lateness)) * 1_000_000)
    return expected.where(F.unix_micros(WINDOW_END) <= F.lit(watermark_us))


def _touched(
    spark: SparkSession, late: Output, rule: EventTime, expected: DataFrame
) -> DataFrame | None:
    """Result keys that dropped late events would have changed: the windows that held a
    dropped event and had closed, with the columns the result shares with the events."""
    assert late.path is not None
    dropped = read_table(spark, late.path)
    if dropped.isEmpty():
        return None
    shared = [c for c in expected.columns if c in dropped.columns]
    if WINDOW_START not in expected.columns:
        if not shared:
            raise ValueError("late events dropped from a result with no column to attribute")
        return dropped.select(*shared).distinct()
    keys = expected.select(WINDOW_START, WINDOW_END, *shared).distinct().alias("k")
    events = dropped.select(*shared, rule.column, "watermark").alias("d")
    time = F.col(f"d.{rule.column}")
    condition = [
        time >= F.col(f"k.{WINDOW_START}"),
        time < F.col(f"k.{WINDOW_END}"),
        F.col(f"k.{WINDOW_END}") <= F.col("d.watermark"),
        *(F.col(f"k.{c}") == F.col(f"d.{c}") for c in shared),
    ]
    columns = [F.col(f"k.{c}").alias(c) for c in (WINDOW_START, WINDOW_END, *shared)]
    return keys.join(events, condition).select(*columns).distinct()
