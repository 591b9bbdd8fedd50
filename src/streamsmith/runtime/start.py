"""Starting and stopping a flow's queries: the one path every run takes.

``streamsmith run`` (always-on and catch-up) starts queries through the supervisor, the
prefix-integrity harness and tests through :func:`start_queries`; both call
:func:`start_flow`, so what is tested is what runs.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TypeVar

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
from streamsmith.runtime.outputs import Output
from streamsmith.runtime.plan import FlowPlan, Plan
from streamsmith.runtime.pruning import pruned_query_frame
from streamsmith.runtime.real_time import check_task_slots
from streamsmith.transforms.expectations import ExpectationError

log = logging.getLogger(__name__)

Started = list[tuple[Output, StreamingQuery]]
T = TypeVar("T")


def together(actions: Sequence[Callable[[], T]]) -> list[T | BaseException]:
    """Run ``actions`` at once, each in a thread of its own, and wait for them all: each
    one's result, or what it raised, in order.

    Starting a streaming query (analysing its plan, setting up its checkpoint and sink)
    takes Spark a second or more, mostly on the driver's one thread per call; a run that
    started its queries one after another began its last one about 3 s per query after
    its first (issue 50), and a catch-up's side queries then waited for nothing."""
    if len(actions) <= 1:
        return [_outcome(action) for action in actions]
    with ThreadPoolExecutor(max_workers=len(actions), thread_name_prefix="start") as pool:
        return list(pool.map(_outcome, actions))


def _outcome(action: Callable[[], T]) -> T | BaseException:
    try:
        return action()
    except BaseException as exc:  # noqa: BLE001  # handed to the caller, who raises it
        return exc


def start_output(
    spark: SparkSession, frame: DataFrame, output: Output, flow: FlowPlan
) -> StreamingQuery:
    """Start the streaming query of one output of ``flow``, writing ``frame``; record
    the fingerprint ``check-upgrade`` compares the next version of the code with."""
    print_ = fingerprint(frame, output, flow)
    if not output.sink.counts_rows(spark):
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
            letters = any(o.role == "quarantine" for o in flow.outputs)
            check_task_slots(spark, flow.source, output.query_name, dead_letters=letters)
    chosen = list(flow.outputs if outputs is None else outputs)

    def start(output: Output) -> tuple[Output, StreamingQuery]:
        frame = pruned_query_frame(spark, flow, output, plan.root, frames)
        return output, start_output(spark, frame, output, flow)

    # The main query first (its side queries look it up as they start), then the others
    # together.
    first = [o for o in chosen if o.role == "main"][:1] or chosen[:1]
    rest = [o for o in chosen if o not in first]
    outcomes = together([partial(start, o) for o in first])
    if not isinstance(outcomes[0], BaseException):
        outcomes += together([partial(start, o) for o in rest])
    started: Started = [o for o in outcomes if not isinstance(o, BaseException)]
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    if failed:
        for _, query in started:
            query.stop()
        raise failed[0]
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


def start_queries(spark: SparkSession, plan: Plan, *, check: bool = True) -> Started:
    """Start one named streaming query per output of every flow (unsupervised: tests and
    the harness drive them with ``processAllAvailable``); without ``check``, the flows
    are not analysed first (:func:`check_user_flows`: the caller has checked the same
    flows, e.g. in an earlier split or before a restart)."""
    if check:
        prepare_flows(spark, plan)
    else:
        create_read_tables(spark, plan)
    outcomes = together([partial(start_flow, spark, plan, f) for f in plan.flows])
    started: Started = [q for o in outcomes if not isinstance(o, BaseException) for q in o]
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    if failed:
        for _, query in started:
            query.stop()
        raise failed[0]
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
