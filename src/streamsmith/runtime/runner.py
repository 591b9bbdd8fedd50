"""Run a plan: as streaming queries (always-on or catch-up) or as one batch backfill.

Both modes call the same source reader and the same transform; only the edges differ
(``readStream``/``writeStream`` with checkpoints versus ``read``/``write``), which is what
makes the streaming output a prefix of the batch output over the same input.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from streamsmith.config import parse_duration
from streamsmith.io.lake import read_table, start_table_stream, table_path, write_table
from streamsmith.io.sinks import start_topic_stream
from streamsmith.io.sources import read_source
from streamsmith.runtime.plan import FlowPlan, Output, Plan
from streamsmith.transforms.quarantine import REJECT_REASON, accepted, quarantined

log = logging.getLogger(__name__)

_POLL_SECONDS = 0.5


class PipelineError(Exception):
    """A query failed at run time; the message names the query and Spark's error."""


@dataclass
class QueryOutcome:
    """What one query did during a run."""

    name: str
    batches: int = 0
    input_rows: int = 0
    error: str | None = None


@dataclass
class RunReport:
    """Outcome of ``run_pipeline``: one entry per query, in plan order."""

    queries: list[QueryOutcome] = field(default_factory=list)

    @property
    def failed(self) -> list[QueryOutcome]:
        return [query for query in self.queries if query.error]


def flow_frame(spark: SparkSession, flow: FlowPlan, root: Path, *, streaming: bool) -> DataFrame:
    """The flow's transformed frame over its source (and lookup tables), streaming or batch."""
    source = read_source(
        spark, flow.source, flow.source_path, flow.definition.record_schema, streaming=streaming
    )
    lookups = {name: read_table(spark, table_path(root, name)) for name in flow.definition.lookups}
    return flow.definition.transform(source, **lookups)


def split_output(frame: DataFrame, output: Output) -> DataFrame:
    """The part of a flow's output that goes to ``output`` (accepted or quarantined rows)."""
    if output.kind == "quarantine":
        return quarantined(frame)
    return accepted(frame) if REJECT_REASON in frame.columns else frame


def start_queries(spark: SparkSession, plan: Plan) -> list[tuple[Output, StreamingQuery]]:
    """Start one named streaming query per output of every flow."""
    started: list[tuple[Output, StreamingQuery]] = []
    try:
        for flow in plan.flows:
            frame = flow_frame(spark, flow, plan.root, streaming=True)
            for output in flow.outputs:
                started.append((output, _start_output(spark, split_output(frame, output), output)))
    except BaseException:
        for _, query in started:
            query.stop()
        raise
    return started


def _wait(query: StreamingQuery, seconds: float) -> None:
    """Wait up to ``seconds`` for ``query`` to end.

    A failure is not raised here: it stays in ``query.exception()``, from which
    :func:`run_pipeline` reports every failed query after stopping the others.
    """
    try:
        query.awaitTermination(seconds)  # type: ignore[arg-type]  # PySpark takes float seconds
    except StreamingQueryException:
        return


def _start_output(spark: SparkSession, frame: DataFrame, output: Output) -> StreamingQuery:
    if output.path is None:
        return start_topic_stream(
            spark,
            frame,
            name=output.query_name,
            topic=output.table,
            options=output.options,
            connector=output.connector,
            checkpoint=output.checkpoint,
            trigger=output.trigger,
            output_mode=output.output_mode,
        )
    return start_table_stream(
        frame,
        name=output.query_name,
        path=output.path,
        checkpoint=output.checkpoint,
        trigger=output.trigger,
        partition_by=output.partition_by,
        output_mode=output.output_mode,
    )


def stop_gracefully(queries: list[StreamingQuery], timeout_seconds: float) -> None:
    """Stop each query between batches, waiting up to ``timeout_seconds`` in total.

    A query still inside a batch at the deadline is stopped anyway; its checkpoint makes
    the interrupted batch run again on the next start, so nothing is lost or doubled.
    """
    deadline = time.monotonic() + timeout_seconds
    for query in queries:
        while (
            query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline
        ):
            _wait(query, 0.1)
        if query.isActive:
            query.stop()


def run_pipeline(spark: SparkSession, plan: Plan, stop: threading.Event | None = None) -> RunReport:
    """Run every flow until its trigger ends it, a query fails, or ``stop`` is set.

    Raises :class:`PipelineError` naming every failed query.
    """
    stop = stop or threading.Event()
    running = start_queries(spark, plan)
    queries = [query for _, query in running]
    timeout = parse_duration(plan.spec.graceful_stop_timeout)
    try:
        while any(query.isActive for query in queries):
            if stop.is_set():
                log.info("stop requested: stopping queries after their current batch")
                stop_gracefully(queries, timeout)
                break
            if any(query.exception() is not None for query in queries):
                break
            if any(not out.trigger.terminates and not q.isActive for out, q in running):
                break  # an always-on query ended: stop the others and report it
            _wait(next(query for query in queries if query.isActive), _POLL_SECONDS)
    finally:
        stop_gracefully(queries, timeout)
    report = RunReport([_outcome(output, query) for output, query in running])
    if report.failed:
        raise PipelineError(
            "; ".join(f"query {outcome.name} failed: {outcome.error}" for outcome in report.failed)
        )
    return report


def _outcome(output: Output, query: StreamingQuery) -> QueryOutcome:
    progress = query.recentProgress
    outcome = QueryOutcome(
        name=output.query_name,
        batches=len(progress),
        input_rows=sum(int(p.numInputRows) for p in progress),
    )
    exception = query.exception()
    if exception is not None:
        outcome.error = _first_line(
            exception.desc if hasattr(exception, "desc") else str(exception)
        )
    return outcome


def _first_line(text: str) -> str:
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "unknown error")


@dataclass
class BackfillReport:
    """Rows written per backfilled table."""

    rows: dict[str, int] = field(default_factory=dict)


def backfill(spark: SparkSession, plan: Plan) -> BackfillReport:
    """Run every flow once as a batch job over its whole input, into the backfill area.

    The transform is the one the stream uses; the tables are replaced, not appended to.
    """
    report = BackfillReport()
    for flow in plan.flows:
        frame = flow_frame(spark, flow, plan.root, streaming=False).persist()
        try:
            for output in flow.outputs:
                part = split_output(frame, output)
                write_table(part, output.backfill_path, output.partition_by)
                report.rows[output.table] = spark.read.parquet(str(output.backfill_path)).count()
        finally:
            frame.unpersist()
    return report


def full_refresh(plan: Plan) -> list[Path]:
    """Delete the app's checkpoints and streaming tables so the next run reprocesses all input."""
    removed = []
    paths = [plan.checkpoint_dir, *(output.path for output in plan.outputs if output.path)]
    for path in paths:
        if path.exists():
            shutil.rmtree(path)
            removed.append(path)
    return removed
