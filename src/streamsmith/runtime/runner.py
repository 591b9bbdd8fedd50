"""Run a plan: as streaming queries (always-on or catch-up) or as one batch backfill.

Both modes build the same frames (``streamsmith.runtime.frames``); only the edges differ
(``readStream``/``writeStream`` with checkpoints versus ``read``/``write``), which is what
makes the streaming output a prefix of the batch output over the same input.
"""

from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from streamsmith.io.lake import read_table, write_table
from streamsmith.runtime.frames import flow_frames, output_frame
from streamsmith.runtime.plan import FlowPlan, Plan
from streamsmith.runtime.scheduler import Clock, run_schedules
from streamsmith.runtime.schema_change import add_new_fields, refused_new_fields
from streamsmith.runtime.supervisor import PipelineError, QueryOutcome, RunReport, supervise

__all__ = [
    "BackfillReport",
    "PipelineError",
    "QueryOutcome",
    "RunReport",
    "backfill",
    "full_refresh",
    "run_pipeline",
]


def run_pipeline(
    spark: SparkSession, plan: Plan, stop: threading.Event | None = None, clock: Clock | None = None
) -> RunReport:
    """Run every flow under supervision until its trigger ends it, a query is given up,
    or ``stop`` is set; see :func:`streamsmith.runtime.supervisor.supervise`. A plan with
    schedules runs them until ``stop`` (:mod:`streamsmith.runtime.scheduler`; ``clock``
    tells the time there).

    Raises :class:`PipelineError` naming every query that failed for good.
    """
    if plan.schedules:
        return run_schedules(spark, plan, stop, clock)
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
        while True:
            try:
                report.rows.update(_backfill_flow(spark, plan, flow))
                break
            except Exception as exc:  # a field the schema lacks: add it and run again
                refused = refused_new_fields(str(exc))
                if flow.schema_store is None and refused is not None:
                    raise PipelineError(f"flow {flow.name}: {refused}") from None
                if flow.schema_store is None or add_new_fields(flow.schema_store, str(exc)) is None:
                    raise
    return report


def _backfill_flow(spark: SparkSession, plan: Plan, flow: FlowPlan) -> dict[str, int]:
    """One flow's batch job into its backfill tables; their row counts."""
    rows: dict[str, int] = {}
    frames = flow_frames(spark, flow, plan.root, streaming=False)
    shared = (frames.tagged if frames.tagged is not None else frames.output).persist()
    try:
        for output in flow.outputs:
            if output.role == "late":
                continue
            part = output_frame(frames, output)
            table_format = output.sink.table_format
            write_table(part, output.backfill_path, output.partition_by, table_format)
            rows[output.table] = read_table(spark, output.backfill_path).count()
    finally:
        shared.unpersist()
    return rows


def full_refresh(plan: Plan) -> list[str]:
    """Delete the app's checkpoints and what its sinks wrote, so the next run
    reprocesses all input; each sink says what it removes (a lake table its folder, a
    PostgreSQL table itself and its ledger entries; Kafka topics are left alone)."""
    for output in plan.outputs:  # all refusals before anything is removed
        output.sink.check_reset()
    removed: list[str] = []
    if plan.checkpoint_dir.exists():
        shutil.rmtree(plan.checkpoint_dir)
        removed.append(str(plan.checkpoint_dir))
    for output in plan.outputs:
        removed += output.sink.reset()
    return removed
