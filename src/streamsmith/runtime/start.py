"""Starting and stopping a flow's queries: the one path every run takes.

``streamsmith run`` (always-on and catch-up) starts queries through the supervisor, the
prefix-integrity harness and tests through :func:`start_queries`; both call
:func:`start_flow`, so what is tested is what runs.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from streamsmith.errors import UserError
from streamsmith.io.lake_paths import is_delta
from streamsmith.io.sinks.base import QueryArgs
from streamsmith.io.sources.delta import record_change_feed
from streamsmith.monitor.progress import WRITTEN_METRIC
from streamsmith.runtime.checkpoint_files import clear_interrupted_writes
from streamsmith.runtime.checkpoints import fingerprint, record_fingerprint
from streamsmith.runtime.frames import flow_frames, output_frame
from streamsmith.runtime.graph import change_feed_tables
from streamsmith.runtime.plan import FlowPlan, Output, Plan
from streamsmith.runtime.pruning import pruned_query_frame
from streamsmith.runtime.real_time import check_task_slots
from streamsmith.transforms.expectations import ExpectationError

log = logging.getLogger(__name__)

Started = list[tuple[Output, StreamingQuery]]


def start_output(
    spark: SparkSession, frame: DataFrame, output: Output, flow: FlowPlan
) -> StreamingQuery:
    """Start the streaming query of one output of ``flow``, writing ``frame``; record
    the fingerprint ``check-upgrade`` compares the next version of the code with."""
    print_ = fingerprint(frame, output, flow)
    frame = frame.observe(WRITTEN_METRIC, F.count(F.lit(1)).alias("rows"))  # rows written
    for leftover in clear_interrupted_writes(output.checkpoint):
        log.warning(
            "%s: removed %s, left by a write a stopped process never finished",
            output.query_name,
            leftover.relative_to(output.checkpoint),
        )
    query = output.sink.start(
        spark,
        frame,
        QueryArgs(output.query_name, output.checkpoint, output.trigger, output.output_mode),
    )
    record_fingerprint(output.checkpoint, print_)
    return query


def start_flow(
    spark: SparkSession, plan: Plan, flow: FlowPlan, outputs: Sequence[Output] | None = None
) -> Started:
    """Start the queries of ``flow`` (or of those of its ``outputs`` given) over one read
    of its source (or, from Kafka, each over a read of the columns it uses:
    ``streamsmith.runtime.pruning``); if one cannot start, stop those already started."""
    frames = flow_frames(spark, flow, plan.root, streaming=True)
    for output in flow.outputs:
        if output.trigger.real_time:
            reads = 2 if output.dead_letter_topic else 1
            check_task_slots(spark, flow.source, reads, output.query_name)
    started: Started = []
    try:
        for output in flow.outputs if outputs is None else outputs:
            frame = pruned_query_frame(spark, flow, output, plan.root, frames)
            started.append((output, start_output(spark, frame, output, flow)))
    except BaseException:
        for _, query in started:
            query.stop()
        raise
    return started


def prepare_flows(spark: SparkSession, plan: Plan) -> None:
    """What every run does before it starts a query: create the tables flows read as a
    stream (:func:`create_read_tables`), then check the flows (:func:`check_user_flows`)."""
    create_read_tables(spark, plan)
    check_user_flows(spark, plan)


def create_read_tables(spark: SparkSession, plan: Plan) -> None:
    """Create, empty, each table another flow reads as a stream and that does not exist
    yet (a stream can only start on an existing table), upstream first, and turn on the
    change data feed of those read by theirs (``read_change_feed``)."""
    read = _tables_read(plan)
    feeds = change_feed_tables(plan.spec)
    for flow in plan.flows:  # in dependency order: a table's own inputs exist by now
        for sink in flow.sinks:
            if sink.path is None or sink.path not in read:
                continue
            if not is_delta(sink.path):
                frames = flow_frames(spark, flow, plan.root, streaming=True)
                if sink.sink.create(spark, output_frame(frames, sink)):
                    log.info("%s: created table %s, empty, for the flows reading it",
                             flow.name, sink.path)  # fmt: skip
            if sink.table in feeds and record_change_feed(spark, sink.path):
                log.info("%s: table %s records its change data feed from now on",
                         flow.name, sink.path)  # fmt: skip


def check_user_flows(spark: SparkSession, plan: Plan) -> None:
    """Build the frames of every flow whose code the spec names (SQL, ``module:function``),
    that has expectations or whose rows are change events (``cdc``), without starting
    anything, so a mistake Spark's analyser finds in them (an unknown column, SQL that
    does not parse, an expectation that is not a boolean) or a column its sinks name
    that its output lacks (:meth:`Sink.check`: keys, partitions, cdc) fails the run
    before any query starts, naming the flow."""
    for flow in analysed_flows(plan):
        try:
            frames = flow_frames(spark, flow, plan.root, streaming=True)
        except ExpectationError as exc:
            key = ("flows", flow.name, "expect", exc.expectation.name)
            origin = plan.spec.origin_of(key) if _in_spec(plan, key) else "its code"
            raise UserError(f"{origin}: flows.{flow.name}: {exc}") from None
        for sink in flow.sinks:
            sink.sink.check(output_frame(frames, sink))


def analysed_flows(plan: Plan) -> list[FlowPlan]:
    """The flows :func:`check_user_flows` analyses: a user's own (a reference app's
    code is tested with the app), or with expectations or change events to check."""
    return [
        flow
        for flow in plan.flows
        if flow.definition.from_spec
        or flow.expectations
        or any(sink.sink.context.cdc is not None for sink in flow.sinks)
    ]


def analyse_flows(spark: SparkSession, plan: Plan) -> None:
    """What ``dry-run`` checks: :func:`check_user_flows`, with every input folder that
    does not exist yet stood in for by an empty one (Spark's file source needs its
    folder to define a stream), and every table a flow reads that no run has created yet
    by an empty Delta table typed as its flow writes it, both in a scratch folder: nothing
    in the lake is read or written, and no query started."""
    read, feeds = _tables_read(plan), change_feed_tables(plan.spec)
    with tempfile.TemporaryDirectory(prefix="streamsmith-dry-run-") as scratch:
        empty = Path(scratch) / "empty"
        empty.mkdir()
        tables: dict[Path, Path] = {}  # a table not created yet -> its stand-in

        def stand_in(path: Path | None) -> Path | None:
            if path is None:
                return None
            if path in tables:
                return tables[path]
            return empty if not path.is_dir() else path

        flows: list[FlowPlan] = []
        for planned in plan.flows:  # in dependency order: a flow's inputs stand by now
            flow = replace(
                planned,
                source_path=stand_in(planned.source_path),
                streams=tuple(
                    replace(stream, source_path=stand_in(stream.source_path))
                    for stream in planned.streams
                ),
            )
            flows.append(flow)
            for sink in flow.sinks:
                if sink.path not in read or is_delta(sink.path):
                    continue
                table = Path(scratch) / "tables" / sink.table
                frames = flow_frames(spark, flow, plan.root, streaming=True)
                if sink.sink.create(spark, output_frame(frames, sink), at=table):
                    tables[sink.path] = table
                    if sink.table in feeds:
                        record_change_feed(spark, table)
        check_user_flows(spark, plan.only(tuple(flows)))


def _tables_read(plan: Plan) -> set[Path]:
    """The lake tables flows of ``plan`` read as Delta streams."""
    sources = [(f.source, f.source_path) for f in plan.flows]
    sources += [(s.source, s.source_path) for f in plan.flows for s in f.streams]
    return {path for source, path in sources if source.format == "delta" and path is not None}


def _in_spec(plan: Plan, key: tuple[str, ...]) -> bool:
    return key[-1] in plan.spec.flows[key[1]].expect


def start_queries(spark: SparkSession, plan: Plan) -> Started:
    """Start one named streaming query per output of every flow (unsupervised: tests and
    the harness drive them with ``processAllAvailable``)."""
    prepare_flows(spark, plan)
    started: Started = []
    try:
        for flow in plan.flows:
            started += start_flow(spark, plan, flow)
    except BaseException:
        for _, query in started:
            query.stop()
        raise
    return started


def wait_for(query: StreamingQuery, seconds: float) -> None:
    """Wait up to ``seconds`` for ``query`` to end.

    A failure is not raised here: it stays in ``query.exception()``, from which the
    supervisor reads it.
    """
    try:
        query.awaitTermination(seconds)  # type: ignore[arg-type]  # PySpark takes float seconds
    except StreamingQueryException:
        return


def stop_gracefully(queries: Started, timeout_seconds: float) -> None:
    """Stop each query once the batch it is running has ended, waiting up to
    ``timeout_seconds`` in total.

    Only the batch in flight is waited for, not a quiet moment: a query with a backlog
    and no trigger interval starts its next batch at once, so it would never have one.
    Side queries stop first: a side batch waits for its flow's main query to read the
    same input, which a stopped main query never does. A query stopped inside a batch
    (the next one, or at the deadline) runs it again on the next start from its
    checkpoint, so nothing is lost or doubled.
    """
    deadline = time.monotonic() + timeout_seconds
    for _, query in sorted(queries, key=lambda started: started[0].role == "main"):
        running = _last_batch(query) + 1
        while (
            query.isActive
            and query.status.get("isTriggerActive")
            and _last_batch(query) < running
            and time.monotonic() < deadline
        ):
            wait_for(query, 0.1)
        if query.isActive:
            query.stop()


def _last_batch(query: StreamingQuery) -> int:
    """The id of the query's last finished batch (-1 before its first)."""
    progress = query.lastProgress
    return int(progress["batchId"]) if progress else -1
