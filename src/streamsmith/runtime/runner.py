"""Run a plan: as streaming queries (always-on or catch-up) or as one batch backfill.

Both modes build the same frames (``streamsmith.runtime.frames``); only the edges differ
(``readStream``/``writeStream`` with checkpoints versus ``read``/``write``), which is what
makes the streaming output a prefix of the batch output over the same input.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JNetworkError
from pyspark.sql import SparkSession

from streamsmith.errors import UserError
from streamsmith.io.lake import read_table
from streamsmith.monitor.eventlog import EventLog, now_text
from streamsmith.monitor.progress import expectation_counts
from streamsmith.monitor.recorder import first_line
from streamsmith.object_store import remove_tree
from streamsmith.runtime.frames import flow_frames, output_frame
from streamsmith.runtime.input_archive import restore
from streamsmith.runtime.maintenance import failed, run_after
from streamsmith.runtime.plan import FlowPlan, Plan
from streamsmith.runtime.scheduler import Clock, run_schedules
from streamsmith.runtime.schema_change import add_new_fields, error_text, refused_new_fields
from streamsmith.runtime.supervisor import (
    JVM_GONE,
    PipelineError,
    QueryOutcome,
    RunReport,
    jvm_alive,
    supervise,
)
from streamsmith.runtime.views import refresh, refresh_failures
from streamsmith.transforms.expectations import EXPECTATIONS_METRIC

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
    schedules, or with maintenance on a cron and a flow always on, runs them until
    ``stop`` (:mod:`streamsmith.runtime.scheduler`; ``clock`` tells the time there). A
    catch-up run ends with its tables' ``after_run`` maintenance, then the refresh of its
    materialized views.

    Raises :class:`PipelineError` naming every query that failed for good, or saying
    that the Spark JVM ended under the run.
    """
    try:
        return _run_pipeline(spark, plan, stop, clock)
    except (ConnectionError, Py4JNetworkError):
        if jvm_alive(spark):
            raise
        raise PipelineError(JVM_GONE) from None


def _run_pipeline(
    spark: SparkSession, plan: Plan, stop: threading.Event | None, clock: Clock | None
) -> RunReport:
    if plan.schedules or ((plan.maintenance_crons or plan.view_crons) and plan.stays_up):
        return run_schedules(spark, plan, stop, clock)
    report = supervise(spark, plan, stop)
    if not plan.stays_up and not (stop is not None and stop.is_set()):
        record = EventLog(plan.root, plan.spec.app).write
        tasks = [task for flow in plan.flows for task in flow.maintenance]
        problems = failed(run_after(tasks, plan.root, record))
        problems += refresh_failures(refresh(spark, plan.root, plan.views, record, "run"))
        if problems:
            raise PipelineError("; ".join(problems))
    return report


@dataclass
class BackfillReport:
    """Rows written per backfilled table, by its folder's name under the backfill area."""

    rows: dict[str, int] = field(default_factory=dict)


def backfill(spark: SparkSession, plan: Plan) -> BackfillReport:
    """Run every flow once as a batch job over its whole input, into the backfill area.

    The transforms are the ones the stream uses; the tables are replaced, not appended
    to. A batch job has no watermark, so it drops nothing as late: late-events outputs
    are skipped. Each sink of a flow with several gets a table of its own, in its own
    format, holding the first's rows (one batch result: whatever their output modes,
    they hold the same rows once every window is closed). The backfill is a run in the
    event log: ``run_started``, one batch per flow (records read, rows written by its
    first sink, quarantined, expectation counts) under the query name
    ``<app>.<flow>.backfill``, then ``run_finished`` or ``run_failed``.
    """
    report = BackfillReport()
    events = EventLog(plan.root, plan.spec.app)
    run = {"queries": [backfill_query(flow) for flow in plan.flows], "backfill": True}
    events.write({"event": "run_started", **run, "message": f"backfill of {len(plan.flows)} flows"})
    # A flow reading another's Delta table reads that flow's backfill (the plan puts it
    # after), so one backfill carries the input through every hop, apart from the stream.
    backfilled = {o.path: o.backfill_path for o in plan.outputs if o.kind == "table"}
    # A table several flows append to (SDP's append flows) is replaced by the first
    # flow's backfill; the others' add to it.
    begun: set[Path] = set()
    read = written = 0
    try:
        for planned in plan.flows:
            flow = planned
            if flow.source.format == "delta" and flow.source_path in backfilled:
                flow = replace(flow, source_path=backfilled[flow.source_path])
            while True:
                try:
                    batch = _backfill_flow(spark, plan, flow, begun)
                    break
                except Exception as exc:  # a field the schema lacks: add it and run again
                    refused = refused_new_fields(error_text(exc))
                    if flow.schema_store is None and refused is not None:
                        raise PipelineError(f"flow {flow.name}: {refused}") from None
                    store = flow.schema_store
                    if store is None or add_new_fields(store, error_text(exc)) is None:
                        raise
            for table, rows in batch.rows.items():  # a table of several flows: their sum
                report.rows[table] = report.rows.get(table, 0) + rows
            read += batch.record["input_rows"]
            written += batch.record["output_rows"]
            events.write(batch.record)
    except Exception as exc:
        end = {"event": "run_failed", "input_rows": read, "output_rows": written}
        end["message"] = first_line(str(exc))
        events.write({**end, **run})
        raise
    tables = ", ".join(f"{table} {rows}" for table, rows in report.rows.items())
    end = {"event": "run_finished", "input_rows": read, "output_rows": written}
    end["message"] = f"rows written: {tables}"
    events.write({**end, **run})
    return report


def backfill_query(flow: FlowPlan) -> str:
    """The name a flow's backfill is recorded under: its main query's, ``.backfill``."""
    return f"{flow.outputs[0].query_name}.backfill"


@dataclass(frozen=True)
class _Backfilled:
    rows: dict[str, int]  # per table written
    record: dict[str, Any]  # the flow's batch, as the event log keeps it


def _backfill_flow(
    spark: SparkSession, plan: Plan, flow: FlowPlan, begun: set[Path]
) -> _Backfilled:
    """One flow's batch job into its backfill tables: their row counts, and the batch's
    event (records read: those parsed, rejected ones too; else the rows written). A
    table in ``begun`` (written by an earlier flow of this backfill) is appended to;
    the tables written are added to it.

    Each output, and the count of records read, reads the input again rather than
    sharing a cached read: a cache of the parsed input spills a large backfill to disk
    and is read back once per output: a backfill was four to five times slower per event
    than the same flows' catch-up, and now about twice (``benchmarks/cost_over_time.py
    catch-up``)."""
    rows: dict[str, int] = {}
    frames = flow_frames(spark, flow, plan.root, streaming=False)
    main = flow.outputs[0]
    for output in flow.outputs:
        if output.role == "late":
            continue
        if output.role == "sink":  # the main output's rows: computed and counted once
            part = read_table(spark, main.backfill_path)
        else:
            part = output_frame(frames, output)
        path = output.backfill_path
        before = read_table(spark, path).count() if path in begun else 0
        output.sink.write_backfill(part, path, append=path in begun)
        begun.add(path)
        rows[path.name] = read_table(spark, path).count() - before
    read = (frames.tagged if frames.tagged is not None else frames.output).count()
    judged = frames.judged.get if frames.judged is not None else None
    rejected = [rows[o.backfill_path.name] for o in flow.outputs if o.role == "quarantine"]
    written = rows[main.backfill_path.name]
    record = {
        "event": "progress",
        "query": backfill_query(flow),
        "query_id": f"backfill-{uuid.uuid4()}",
        "batch_id": 0,
        "batch_time": now_text(),
        "input_rows": read,
        "output_rows": written,
        "quarantined": sum(rejected),
        "late": 0,
        "expectations": expectation_counts({EXPECTATIONS_METRIC: judged or {}}),
    }
    return _Backfilled(rows, record)


def full_refresh(plan: Plan, tables: Sequence[str] = ()) -> list[str]:
    """Delete the app's checkpoints and what its sinks wrote, so the next run
    reprocesses all input; each sink says what it removes (a lake table its folder, a
    PostgreSQL table itself and its ledger entries; Kafka topics are left alone).

    With ``tables``, only the flows writing them and every flow downstream of those (a
    stream of a rebuilt table must start over too) are reset; the others go on from
    their checkpoints."""
    outputs = plan.outputs
    if tables:
        writers: dict[str, set[str]] = {}  # several flows may append to one table
        for flow in plan.flows:
            for output in flow.sinks:
                writers.setdefault(output.table, set()).add(flow.name)
        unknown = sorted(set(tables) - set(writers))
        if unknown:
            raise UserError(
                f"--full-refresh-table {', '.join(unknown)}: no flow of app {plan.app.name} "
                f"writes it (its tables: {', '.join(sorted(writers))})"
            )
        flows = plan.downstream({name for table in tables for name in writers[table]})
        outputs = tuple(output for flow in flows for output in flow.outputs)
    for output in outputs:  # all refusals before anything is removed
        output.sink.check_reset()
    checkpoints = [plan.checkpoint_dir] if not tables else [o.checkpoint for o in outputs]
    removed: list[str] = []
    for checkpoint in checkpoints:
        if checkpoint.exists():
            remove_tree(checkpoint)
            removed.append(str(checkpoint))
    for output in outputs:
        removed += output.sink.reset()
    return removed


def restore_archives(plan: Plan, tables: Sequence[str] = ()) -> list[str]:
    """After :func:`full_refresh` with the same ``tables``: what became of the sources'
    archives (``streamsmith.runtime.input_archive.restore``), one line each."""
    if tables:
        writers = {output.table: flow.name for flow in plan.flows for output in flow.sinks}
        flows = plan.downstream({writers[table] for table in tables})
        reset = [output.checkpoint for flow in flows for output in flow.outputs]
    else:
        reset = [plan.checkpoint_dir]
    said = (restore(archive, reset) for archive in plan.archives)
    return [line for line in said if line is not None]
