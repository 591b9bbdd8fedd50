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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from streamsmith.config import Trigger
from streamsmith.io.kafka.range_cache import RANGE_CACHE, RANGE_CACHE_COUNTED
from streamsmith.io.lake import model_path, read_table, start_table_stream, table_path, write_table
from streamsmith.io.postgres.dsn import resolve_dsn
from streamsmith.io.postgres.sink import PostgresTarget, reset_target
from streamsmith.io.sinks import start_memory_stream, start_postgres_stream, start_topic_stream
from streamsmith.io.sources import read_source
from streamsmith.io.webhook import WebhookTarget, start_webhook_stream
from streamsmith.monitor.progress import QUARANTINE_METRIC
from streamsmith.runtime.checkpoints import fingerprint, record_fingerprint
from streamsmith.runtime.clean_input import can_skip_clean_input, start_quarantine_stream
from streamsmith.runtime.flow_batches import FlowCover, FlowFacts, SourceKind, observe_flow
from streamsmith.runtime.late import start_late_stream
from streamsmith.runtime.plan import FlowPlan, Output, Plan, is_side_query
from streamsmith.transforms.quarantine import (
    POSITION,
    REJECT_REASON,
    SOURCE_FILE,
    accepted,
    quarantined,
)

log = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class FlowFrames:
    """A flow's frames over one read of its source: the output, and the tagged events
    its quarantine and late-events companions take (None when it has no ``prepare``)."""

    output: DataFrame
    tagged: DataFrame | None


def flow_frames(spark: SparkSession, flow: FlowPlan, root: Path, *, streaming: bool) -> FlowFrames:
    """The flow's transformed frames over its source (and lookup tables), streaming or batch."""
    definition = flow.definition
    source = read_source(
        spark, flow.source, flow.source_path, definition.record_schema, streaming=streaming
    )
    inputs: dict[str, Any] = {
        name: read_table(spark, table_path(root, name)) for name in definition.lookups
    }
    if definition.models:
        inputs["models"] = {name: str(model_path(root, name)) for name in definition.models}
    for stream in flow.streams:
        other = read_source(
            spark,
            stream.source,
            stream.source_path,
            stream.definition.record_schema,
            streaming=streaming,
        )
        inputs[stream.definition.name] = _accepted(stream.definition.prepare(other))
    if definition.prepare is None:
        return FlowFrames(definition.transform(source, **inputs), None)
    tagged = definition.prepare(source)
    # The main query reports its rejects and oldest event time per batch, so the side
    # queries can skip the batches that hold nothing for them. The report needs every
    # row parsed (Spark then cannot push the transform's filters into a JSON reader), so
    # a flow without side queries goes without it.
    rule = definition.event_time
    late_time = rule.column if rule is not None and definition.record_late else None
    reported = streaming and any(is_side_query(flow, output) for output in flow.outputs)
    counted = observe_flow(tagged, late_time) if reported else tagged
    return FlowFrames(definition.transform(_accepted(counted), **inputs), tagged)


def _accepted(tagged: DataFrame) -> DataFrame:
    return accepted(tagged) if REJECT_REASON in tagged.columns else tagged


def output_frame(frames: FlowFrames, output: Output) -> DataFrame:
    """The part of a flow's frames that goes to ``output``."""
    tagged = frames.tagged if frames.tagged is not None else frames.output
    if output.kind == "quarantine":
        return quarantined(tagged)
    if output.kind == "late":  # lineage lines late events up with the flow's batches
        if REJECT_REASON not in tagged.columns:
            return tagged
        return accepted(tagged, keep=(SOURCE_FILE, POSITION))
    return _accepted(frames.output)


def start_queries(spark: SparkSession, plan: Plan) -> list[tuple[Output, StreamingQuery]]:
    """Start one named streaming query per output of every flow."""
    started: list[tuple[Output, StreamingQuery]] = []
    dsn = resolve_dsn(plan.spec) if any(o.kind == "postgres" for o in plan.outputs) else ""
    try:
        for flow in plan.flows:
            frames = flow_frames(spark, flow, plan.root, streaming=True)
            for output in flow.outputs:
                frame = query_frame(spark, flow, output, plan.root, frames)
                query = start_output(spark, frame, output, flow, plan, dsn)
                started.append((output, query))
    except BaseException:
        for _, query in started:
            query.stop()
        raise
    return started


def query_frame(
    spark: SparkSession,
    flow: FlowPlan,
    output: Output,
    root: Path,
    frames: FlowFrames | None = None,
) -> DataFrame:
    """What the streaming query of ``output`` writes: its part of the flow's ``frames``
    (one read of the source for all of the flow's queries), or of a read of its own."""
    if is_side_query(flow, output) and RANGE_CACHE in flow.source.options:
        # A side query may skip batches, so it reads shared Kafka ranges uncounted.
        options = {**flow.source.options, RANGE_CACHE_COUNTED: False}
        flow = replace(flow, source=flow.source.model_copy(update={"options": options}))
        frames = None
    if frames is None:
        frames = flow_frames(spark, flow, root, streaming=True)
    return output_frame(frames, output)


def _wait(query: StreamingQuery, seconds: float) -> None:
    """Wait up to ``seconds`` for ``query`` to end.

    A failure is not raised here: it stays in ``query.exception()``, from which
    the supervisor reads it from there.
    """
    try:
        query.awaitTermination(seconds)  # type: ignore[arg-type]  # PySpark takes float seconds
    except StreamingQueryException:
        return


class _QueryArgs(TypedDict):
    """What every sink's start function takes."""

    name: str
    checkpoint: Path
    trigger: Trigger


def start_output(
    spark: SparkSession, frame: DataFrame, output: Output, flow: FlowPlan, plan: Plan, dsn: str
) -> StreamingQuery:
    """Start the streaming query of one output of ``flow``, writing ``frame``; record
    the fingerprint ``check-upgrade`` compares the next version of the code with."""
    print_ = fingerprint(frame, output, flow)
    query = _start_query(spark, frame, output, flow, plan, dsn)
    record_fingerprint(output.checkpoint, print_)
    return query


def _start_query(
    spark: SparkSession, frame: DataFrame, output: Output, flow: FlowPlan, plan: Plan, dsn: str
) -> StreamingQuery:
    common = _QueryArgs(
        name=output.query_name, checkpoint=output.checkpoint, trigger=output.trigger
    )
    if output.kind == "topic":
        return start_topic_stream(
            spark,
            frame,
            topic=output.table,
            options=output.options,
            connector=output.connector,
            output_mode=output.output_mode,
            **common,
        )
    if output.kind == "postgres":
        return start_postgres_stream(frame, postgres_target(plan, output, dsn), **common)
    if output.kind == "memory":
        return start_memory_stream(
            frame, table=output.table, output_mode=output.output_mode, **common
        )
    assert output.path is not None
    if output.kind == "webhook":
        assert output.url is not None
        target = WebhookTarget.from_options(output.url, dict(output.options))
        return start_webhook_stream(frame, target=target, undelivered=output.path, **common)
    if output.kind == "quarantine":
        return _start_quarantine(spark, frame, output, flow, common)
    if output.kind == "late":
        assert flow.definition.event_time is not None
        source = _side_source(flow, lineage=frame)
        return start_late_stream(
            frame,
            flow.definition.event_time,
            path=output.path,
            flow_checkpoint=flow.outputs[0].checkpoint,
            source=source,
            facts=FlowFacts(spark, flow.outputs[0].spark_name) if source else None,
            **common,
        )
    return start_table_stream(
        frame,
        path=output.path,
        partition_by=output.partition_by,
        output_mode=output.output_mode,
        **common,
    )


def _start_quarantine(
    spark: SparkSession, frame: DataFrame, output: Output, flow: FlowPlan, common: _QueryArgs
) -> StreamingQuery:
    """The quarantine query: skipping what the flow's main query found clean where it
    can tell (``streamsmith.runtime.clean_input``), else Spark's file sink."""
    assert output.path is not None
    main = flow.outputs[0]
    source = _side_source(flow)
    skips = flow.definition.prepare is not None and can_skip_clean_input(
        output.path, single_input=source is not None
    )
    if source is not None and skips:
        return start_quarantine_stream(
            frame,
            path=output.path,
            partition_by=output.partition_by,
            cover=FlowCover(source, main.checkpoint, output.checkpoint),
            facts=FlowFacts(spark, main.spark_name),
            **common,
        )
    frame = frame.observe(QUARANTINE_METRIC, F.count(F.lit(1)).alias("rows"))
    return start_table_stream(frame, path=output.path, partition_by=output.partition_by, **common)


def _side_source(flow: FlowPlan, lineage: DataFrame | None = None) -> SourceKind | None:
    """How a side query of ``flow`` finds the flow's batches that read its input: by file
    or by Kafka offset (``streamsmith.runtime.flow_batches``); None for a flow reading
    several sources, or when ``lineage`` (a frame that must say where each row came
    from) lacks the columns that say it."""
    if flow.streams:
        return None
    kind: SourceKind | None = None
    needed: tuple[str, ...] = ()
    if flow.source.is_file_source:
        kind, needed = "files", (SOURCE_FILE,)
    elif flow.source.format == "kafka":
        kind, needed = "kafka", (SOURCE_FILE, POSITION)
    if lineage is not None and not set(needed) <= set(lineage.columns):
        return None
    return kind


def postgres_target(plan: Plan, output: Output, dsn: str) -> PostgresTarget:
    """The PostgreSQL table a ``postgres`` output keeps; the ledger knows it by query name."""
    return PostgresTarget(
        dsn=dsn,
        table=output.table,
        key=output.key,
        output_mode=output.output_mode,
        sink=output.query_name,
        schema=plan.spec.postgres.db_schema,
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
    """Run every flow under supervision until its trigger ends it, a query is given up,
    or ``stop`` is set; see :func:`streamsmith.runtime.supervisor.supervise`.

    Raises :class:`PipelineError` naming every query that failed for good.
    """
    from streamsmith.runtime.supervisor import supervise  # it builds on this module

    return supervise(spark, plan, stop)


@dataclass
class BackfillReport:
    """Rows written per backfilled table."""

    rows: dict[str, int] = field(default_factory=dict)


def backfill(spark: SparkSession, plan: Plan) -> BackfillReport:
    """Run every flow once as a batch job over its whole input, into the backfill area.

    The transforms are the ones the stream uses; the tables are replaced, not appended
    to. A batch job has no watermark, so it drops nothing as late: late-events outputs
    are skipped.
    """
    report = BackfillReport()
    for flow in plan.flows:
        frames = flow_frames(spark, flow, plan.root, streaming=False)
        shared = (frames.tagged if frames.tagged is not None else frames.output).persist()
        try:
            for output in flow.outputs:
                if output.kind == "late":
                    continue
                part = output_frame(frames, output)
                write_table(part, output.backfill_path, output.partition_by)
                report.rows[output.table] = spark.read.parquet(str(output.backfill_path)).count()
        finally:
            shared.unpersist()
    return report


def full_refresh(plan: Plan) -> list[str]:
    """Delete the app's checkpoints and outputs so the next run reprocesses all input.

    Lake tables are removed, PostgreSQL tables dropped with their ledger entries; Kafka
    topics are left alone (consumers may read them; delete them with Kafka's tools).
    """
    removed: list[str] = []
    paths = [plan.checkpoint_dir, *(output.path for output in plan.outputs if output.path)]
    for path in paths:
        if path.exists():
            shutil.rmtree(path)
            removed.append(str(path))
    postgres = [output for output in plan.outputs if output.kind == "postgres"]
    if postgres:
        dsn = resolve_dsn(plan.spec)
        for output in postgres:
            target = postgres_target(plan, output, dsn)
            reset_target(target)
            removed.append(f"postgres table {target.schema}.{target.table}")
    return removed
