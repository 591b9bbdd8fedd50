"""Supervise every query of a run: restart failures from their checkpoint, stop cleanly.

Each output of each flow is one streaming query. When one fails, the others keep
running; the failed one is restarted from its checkpoint after an exponential backoff
(``supervisor.backoff``, doubling up to ``supervisor.max_backoff``). A query that fails
``supervisor.max_retries + 1`` times in a row without completing a batch is given up:
the others are stopped after their current batch and the run raises
:class:`PipelineError` (the CLI exits 1). Every failure,
restart and give-up is an event in the event log and a notification.

With a trigger that ends (``available-now``, ``once``), a flow that reads another
flow's table starts only once that flow has finished, so one scheduled catch-up carries
new input through a chain of flows (logs -> alerts -> alert delivery) to the end.

The checkpoint makes a restart exactly-once: the batch that failed is planned again
from the offsets it recorded, and the sinks recognise batches they already committed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JNetworkError
from pyspark.errors import AnalysisException, StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from streamsmith.config import parse_duration
from streamsmith.errors import UserError
from streamsmith.io.admission import FileLimits
from streamsmith.io.decoding import damaged_gzip
from streamsmith.io.lake_paths import is_table
from streamsmith.monitor import observed
from streamsmith.monitor.lag import FileSourceProbe
from streamsmith.monitor.progress import (
    LATE_METRIC,
    QUARANTINE_METRIC,
    records_read,
    rows_written,
)
from streamsmith.monitor.recorder import Monitor, first_line, flush_listener_bus
from streamsmith.runtime.describe import graph_edges
from streamsmith.runtime.flow_batches import MainQueryBehind
from streamsmith.runtime.frames import flow_frames, output_frame
from streamsmith.runtime.input_archive import ARCHIVE_EVERY_S, archive_inputs
from streamsmith.runtime.late import late_possible
from streamsmith.runtime.outputs import Output
from streamsmith.runtime.plan import FlowPlan, Plan, is_side_query
from streamsmith.runtime.schema_change import add_new_fields, error_text, refused_new_fields
from streamsmith.runtime.side_sinks import LateEventsSink, side_notes
from streamsmith.runtime.start import (
    Started,
    prepare_flows,
    start_flow,
    stop_gracefully,
    together,
)

log = logging.getLogger(__name__)

# What a side query's writer reports its rows as (``monitor.observed``), by its role.
SIDE_METRICS = {"quarantine": QUARANTINE_METRIC, "late": LATE_METRIC}

_POLL_SECONDS = 0.5
_RESIZE_CHECK_SECONDS = 2.0  # how often adaptive file sources list their input


class PipelineError(Exception):
    """A query failed at run time; the message names the query and Spark's error."""


@dataclass
class QueryOutcome:
    """What one query did during a run."""

    name: str
    batches: int = 0
    input_rows: int = 0  # the records read (see monitor.progress.records_read)
    error: str | None = None
    role: str = "main"  # or a side query's (quarantine, late), which re-reads the input
    output_rows: int = 0  # the rows written (a side query's: quarantined, late)
    changes: bool = False  # a cdc flow's: its rows are change events, applied by key

    def summary(self) -> str:
        """The query's line in ``run``'s summary. A side query's records read are its
        flow's again: it says what it kept; a cdc flow's rows written are change events
        (a table row may take several, or none: a delete)."""
        done = f"{self.name}: {self.batches} batches"
        if self.role == "quarantine":
            return f"{done}, {self.output_rows} records quarantined"
        if self.role == "late":
            return f"{done}, {self.output_rows} late events recorded"
        changes = " (change events, applied by key)" if self.changes else ""
        return f"{done}, {self.input_rows} records read, {self.output_rows} rows written{changes}"


@dataclass
class RunReport:
    """Outcome of a run: one entry per query, in plan order."""

    queries: list[QueryOutcome] = field(default_factory=list)

    @property
    def failed(self) -> list[QueryOutcome]:
        return [query for query in self.queries if query.error]


@dataclass
class Supervised:
    """One query of the run, across its restarts."""

    output: Output
    flow: FlowPlan
    query: StreamingQuery | None = None
    state: str = "starting"  # waiting, deferred, active, restarting, finished, failed, stopped
    failures: int = 0  # in a row, without a completed batch in between
    restart_at: float = 0.0
    batches: int = 0
    input_rows: int = 0
    output_rows: int = 0
    error: str | None = None
    _seen: str = field(default="", repr=False)  # timestamp of the last progress tallied

    def tally(self) -> None:
        """Fold the current query's new progress into the run's totals (idempotent).

        Spark keeps only the latest progress reports (100 by default), so new ones are
        told apart by their timestamps, not by their position.
        """
        if self.query is None:
            return
        last = self.query.lastProgress
        if last is None or str(last.timestamp) <= self._seen:
            return
        new = [p for p in self.query.recentProgress if str(p.timestamp) > self._seen]
        if not new:
            return
        self.failures = 0  # it completed a trigger since it (re)started
        self.batches += len(new)
        batches = [json.loads(p.json) for p in new]
        self.input_rows += sum(records_read(batch) for batch in batches)
        self.output_rows += sum(self._written(batch) for batch in batches)
        self._seen = max(str(p.timestamp) for p in new)

    def _written(self, progress: dict[str, Any]) -> int:
        """The rows a batch wrote; a side query's writer counts them itself where its
        batch skips (or replaces) the frame Spark observes (``monitor.observed``)."""
        metric = SIDE_METRICS.get(self.output.role)
        if metric is not None:
            query, batch = str(progress.get("name")), int(progress["batchId"])
            noted = observed.take(query, batch, metric, reader="run")
            if noted is not None:
                return noted
        return rows_written(progress)


class Supervisor:
    """Runs a plan's queries, restarting failed ones; see the module docstring."""

    def __init__(self, spark: SparkSession, plan: Plan, monitor: Monitor) -> None:
        self.spark = spark
        self.plan = plan
        self.monitor = monitor
        self.spec = plan.spec.supervisor
        self.slots = [Supervised(output, flow) for flow in plan.flows for output in flow.outputs]
        self.probes = file_probes(plan)
        # Adaptive file batches, per flow (its queries must cut the input alike).
        self.file_limits = {
            flow.name: FileLimits(
                flow.source.min_files_per_trigger, flow.source.max_files_per_trigger
            )
            for flow in plan.flows
            if flow.source.min_files_per_trigger and flow.source.max_files_per_trigger
        }
        self.files_limit: dict[str, int] = {}
        self._next_resize_check = 0.0
        self.waiting = [flow for flow in plan.flows if _deferred(plan, flow)]
        read = {name for flow in plan.flows for name, _ in flow.inputs}
        self.archives = tuple(a for a in plan.archives if a.source in read)
        self._next_archive = 0.0
        for slot in self.slots:
            if slot.flow in self.waiting:
                slot.state = "waiting"
            if _defers_late(slot):
                slot.state = "deferred"

    def health(self) -> dict[str, str]:
        """Each query's state, for ``/health``."""
        return {slot.output.spark_name: slot.state for slot in self.slots}

    def start_all(self) -> None:
        """Start every query. A flow whose sink or source cannot be reached yet (its
        database or broker still down) is restarted with backoff, as a failed query is;
        a mistake of the user's stops those already started and is raised."""
        prepare_flows(self.spark, self.plan)
        try:
            flows = [flow for flow in self.plan.flows if flow not in self.waiting]
            for flow in flows:
                limits = self.file_limits.get(flow.name)
                if limits is not None:
                    backlog = self.probes[flow.outputs[0].spark_name].backlog().files
                    self.files_limit[flow.name] = limits.choose(backlog, None)
            # The flows' queries start together (``together``); each flow's in its thread.
            running = [self._running_flow(flow) for flow in flows]
            outcomes = together(
                [partial(start_flow, self.spark, self.plan, f, self._startable(f)) for f in running]
            )
            for outcome in outcomes:  # every query that started is tracked, to be stopped
                if not isinstance(outcome, BaseException):
                    self._track(outcome)
            for outcome in outcomes:
                if isinstance(outcome, UserError | AnalysisException) or (
                    isinstance(outcome, BaseException) and not isinstance(outcome, Exception)
                ):
                    raise outcome
            for flow, outcome in zip(flows, outcomes, strict=True):
                if isinstance(outcome, Exception):  # retried like any failure, within max_retries
                    log.warning("starting %s failed", flow.name, exc_info=outcome)
                    for slot in self.slots:
                        if slot.flow is flow:
                            self._failed(slot, f"start failed: {_message(outcome)}")
        except BaseException:
            stop_gracefully(_running(self.slots), 0)
            raise

    def _start_flow(self, flow: FlowPlan) -> None:
        running = self._running_flow(flow)
        self._track(start_flow(self.spark, self.plan, running, self._startable(running)))

    def _startable(self, flow: FlowPlan) -> list[Output]:
        """The outputs of ``flow`` to start with it: all but a deferred late-events query."""
        deferred = [slot.output for slot in self.slots if slot.state == "deferred"]
        return [output for output in flow.outputs if output not in deferred]

    def _start_deferred(self) -> None:
        """Start each deferred late-events query whose flow's main query has finished,
        if one of its batches read input under a watermark; else nothing can have been
        dropped as late, and the query is done without starting."""
        for slot in self.slots:
            if slot.state != "deferred":
                continue
            main = next(s for s in self.slots if s.flow is slot.flow and s.output.role == "main")
            if main.state != "finished":
                continue
            if not late_possible(main.output.checkpoint):
                log.info("%s not started: no batch of %s read input under a watermark",
                         slot.output.query_name, main.output.query_name)  # fmt: skip
                if slot.output.path is not None and not is_table(slot.output.path):
                    frames = flow_frames(self.spark, slot.flow, self.plan.root, streaming=True)
                    slot.output.sink.create(self.spark, output_frame(frames, slot.output))
                slot.state = "finished"
                continue
            slot.state = "starting"
            self._start_one(slot, "start")

    def _track(self, started: Started) -> None:
        for output, query in started:
            slot = next(slot for slot in self.slots if slot.output is output)
            slot.query = query
            slot.state = "active"

    def _running_flow(self, flow: FlowPlan) -> FlowPlan:
        """``flow`` with the file limit it currently runs with, when adaptive."""
        limit = self.files_limit.get(flow.name)
        if limit is None:
            return flow
        source = flow.source.model_copy(update={"max_files_per_trigger": limit})
        return dataclasses.replace(flow, source=source)

    def _restart(self, slot: Supervised) -> None:
        """Start the query again; failing to start (its database still down, say) is
        one more failure of the query, with the same backoff and retry budget."""
        self.monitor.record(
            {"event": "restart", "query": slot.output.spark_name, "attempt": slot.failures}
        )
        self._start_one(slot, "restart")

    def _start_one(self, slot: Supervised, what: str) -> None:
        """Start ``slot``'s query alone; failing to is one more failure of it (``what``
        failed: the message)."""
        try:
            flow = self._running_flow(slot.flow)
            self._track(start_flow(self.spark, self.plan, flow, [slot.output]))
        except Exception as exc:
            log.warning("%s of %s failed", what, slot.output.query_name, exc_info=True)
            self._failed(slot, f"{what} failed: {_message(exc)}")

    def step(self) -> bool:
        """Check every query once; False when the run is over (done or given up)."""
        now = time.monotonic()
        for slot in self.slots:
            if slot.state == "restarting" and now >= slot.restart_at:
                self._restart(slot)
            query = slot.query
            if query is None or slot.state != "active":
                continue
            slot.tally()
            exception = query.exception()
            if exception is not None:
                refused = refused_new_fields(error_text(exception))
                damaged = damaged_gzip(error_text(exception))
                if slot.flow.schema_store is None and refused is not None:
                    self._failed(slot, refused, retry=False)  # the same batch would fail again
                elif damaged is not None:  # so would a damaged file
                    self._failed(slot, _damaged_file(slot.flow, *damaged), retry=False)
                elif MainQueryBehind.__name__ in error_text(exception):
                    self._wait_for_main(slot)
                elif not self._schema_changed(slot, exception):
                    self._failed(slot, _message(exception))
            elif not query.isActive:
                if slot.output.trigger.terminates:
                    slot.state = "finished"
                else:  # an always-on query ended without an error, and nobody asked
                    slot.state = "failed"
                    slot.error = "stopped unexpectedly (without an error)"
        if any(slot.state == "failed" for slot in self.slots):
            return False
        self._start_ready()
        self._start_deferred()
        if self.file_limits and now >= self._next_resize_check:
            self._next_resize_check = now + _RESIZE_CHECK_SECONDS
            for flow in self.plan.flows:
                self._adapt_files(flow)
        going = any(
            slot.state in ("active", "restarting", "waiting", "deferred") for slot in self.slots
        )
        if self.archives and (now >= self._next_archive or not going):
            self.archive_inputs()
        return going

    def archive_inputs(self) -> None:
        """Move the input every reader has committed out of the sources that archive."""
        self._next_archive = time.monotonic() + ARCHIVE_EVERY_S
        archive_inputs(self.archives, self.monitor.record)

    def _start_ready(self) -> None:
        """Start the waiting flows whose upstream flows have all finished."""
        finished = {
            flow.name
            for flow in self.plan.flows
            if all(slot.state == "finished" for slot in self.slots if slot.flow is flow)
        }
        for flow in list(self.waiting):
            if self.plan.upstream(flow) <= finished:
                self.waiting.remove(flow)
                log.info("starting %s: the flows it reads from have finished", flow.name)
                self._start_flow(flow)

    def _adapt_files(self, flow: FlowPlan) -> None:
        """Switch an always-on flow's file limit when its backlog asks for it: stop its
        queries after their current batch and start them again with the new limit."""
        limits = self.file_limits.get(flow.name)
        slots = [slot for slot in self.slots if slot.flow is flow]
        if limits is None or flow.outputs[0].trigger.terminates:
            return
        if any(slot.state != "active" for slot in slots):
            return  # restarting after a failure: it picks the limit up then
        backlog = self.probes[flow.outputs[0].spark_name].backlog().files
        current = self.files_limit[flow.name]
        chosen = limits.choose(backlog, current)
        if chosen == current:
            return
        stop_gracefully(_running(slots), 60)
        for slot in slots:
            slot.tally()
        self.files_limit[flow.name] = chosen
        for slot in slots:
            self.monitor.record(
                {
                    "event": "resize",
                    "query": slot.output.spark_name,
                    "message": f"maxFilesPerTrigger {current} -> {chosen}: {backlog} files behind",
                }
            )
        self._start_flow(flow)

    def _schema_changed(self, slot: Supervised, exception: object) -> bool:
        """Whether the query stopped at a field its source's schema lacks; if so, that
        schema has a version with the field now, and the query starts again at once to
        run the batch under it (see runtime.schema_change)."""
        store = slot.flow.schema_store
        error = error_text(exception)
        version = add_new_fields(store, error) if store is not None else None
        if version is None:
            return False
        self.monitor.record(
            {
                "event": "schema_change",
                "query": slot.output.spark_name,
                "message": f"schema version {version.version}: {version.reason}",
            }
        )
        slot.query = None
        slot.state = "restarting"
        slot.restart_at = time.monotonic()
        return True

    def _wait_for_main(self, slot: Supervised) -> None:
        """A side query stopped before committing a batch its main query had not
        committed (``flow_batches.MainQueryBehind``): no failure of its own; it starts
        again after the backoff, with the main query's restart, and runs that batch then.
        """
        self.monitor.record(
            {
                "event": "side_waits",
                "query": slot.output.spark_name,
                "message": "its flow's main query has not committed the batch; starting again",
            }
        )
        slot.query = None
        slot.state = "restarting"
        slot.restart_at = time.monotonic() + parse_duration(self.spec.backoff)

    def _failed(self, slot: Supervised, message: str, *, retry: bool = True) -> None:
        """Count one failed attempt; give the query up when ``retry`` is False (the same
        batch would fail again) or it has failed more than ``max_retries`` times in a row.
        """
        message = self.monitor.log.redact(message)  # it is logged, raised and notified
        slot.failures += 1
        slot.query = None
        slot.error = message
        name = slot.output.spark_name
        self.monitor.record(
            {"event": "failure", "query": name, "attempt": slot.failures, "message": message}
        )
        if not retry or slot.failures > self.spec.max_retries:
            slot.state = "failed"
            self.monitor.record(
                {
                    "event": "gave_up",
                    "query": name,
                    "attempt": slot.failures,
                    "message": f"{_gave_up_after(slot.failures, retry=retry)}: {message}",
                }
            )
            return
        backoff = parse_duration(self.spec.backoff) * 2 ** (slot.failures - 1)
        delay = min(backoff, parse_duration(self.spec.max_backoff))
        log.warning("query %s failed (%s); restarting in %.1f s", name, message, delay)
        slot.state = "restarting"
        slot.restart_at = time.monotonic() + delay

    def wait(self) -> None:
        """Block until a query ends or the poll interval passes."""
        active = [s.query for s in self.slots if s.query is not None and s.state == "active"]
        if not active:
            time.sleep(_POLL_SECONDS)
            return
        try:
            active[0].awaitTermination(_POLL_SECONDS)  # type: ignore[arg-type]  # float seconds
        except StreamingQueryException:
            return  # read again from query.exception() by the next step

    def stop(self, timeout_seconds: float) -> None:
        """Stop every running query after its current batch (see ``stop_gracefully``)."""
        stop_gracefully(_running(self.slots), timeout_seconds)
        for slot in self.slots:
            slot.tally()
            if slot.state in ("active", "restarting"):
                slot.state = "stopped"
        if self.archives:  # what the last batches committed
            self.archive_inputs()

    def report(self) -> RunReport:
        return RunReport(
            [
                QueryOutcome(
                    slot.output.query_name,
                    slot.batches,
                    slot.input_rows,
                    slot.error if slot.state == "failed" else None,
                    slot.output.role,
                    slot.output_rows,
                    changes=slot.output.role == "main" and slot.output.sink.context.cdc is not None,
                )
                for slot in self.slots
            ]
        )


def _gave_up_after(failures: int, *, retry: bool) -> str:
    """How a query came to be given up, with the attempts it really made."""
    if not retry:
        return "not retried (the same batch would fail again)"
    return "failed once" if failures == 1 else f"failed {failures} times in a row"


def supervise(spark: SparkSession, plan: Plan, stop: threading.Event | None = None) -> RunReport:
    """Run every flow until its trigger ends it, ``stop`` is set, or a query is given up.

    The run is one ``run_started`` event and one ``run_finished``, ``run_failed`` or
    ``run_stopped`` in the event log. Raises :class:`PipelineError` naming every query
    that failed for good.
    """
    stop = stop or threading.Event()
    monitor = plan_monitor(plan)
    supervisor = Supervisor(spark, plan, monitor)
    monitor.attach(spark, supervisor.health)
    timeout = parse_duration(plan.spec.graceful_stop_timeout)
    run = {"queries": [output.spark_name for output in plan.outputs]}
    graph = [edge.as_dict() for edge in graph_edges(plan)]  # for the dashboard to draw
    started = {"event": "run_started", **run, "graph": graph}
    monitor.record({**started, "message": f"{len(supervisor.slots)} queries"})
    error: str | None = None
    for output in plan.outputs:  # what check-upgrade notes, said before the run
        for note in side_notes(output.sink, output.checkpoint):
            log.warning("%s: %s", output.spark_name, note)
    try:
        supervisor.start_all()
        while supervisor.step():
            if stop.is_set():
                log.info("stop requested: stopping queries after their current batch")
                break
            supervisor.wait()
    except (ConnectionError, Py4JNetworkError) as exc:
        if jvm_alive(spark):  # another connection failed: an error like any other
            error = _message(exc)
            raise
        # else the JVM is gone: reported below as such, not as a trace of py4j's
    except Exception as exc:
        error = _message(exc)
        raise
    finally:
        gone = _stop_all(supervisor, spark, timeout)
        error = error or gone
        report = supervisor.report()
        monitor.record({**run_end(report, stopped=stop.is_set(), error=error), **run})
        if gone is None:
            monitor.detach(spark)
    if gone is not None:
        raise PipelineError(gone)
    if report.failed:
        raise PipelineError(failures(report))
    return report


# The driver JVM died under the run: a signal to the whole process group (systemd's
# default KillMode, `kill -- -PGID`), the OOM killer. Its queries' batches in flight
# were never committed, so the next start runs them again: nothing is lost.
JVM_GONE = (
    "the Spark JVM ended before its queries stopped (a signal to the whole process "
    "group? stop the streamsmith process alone: SIGTERM to its pid, Ctrl-C, or systemd's "
    "KillMode=mixed); the batches in flight run again at the next start"
)


def jvm_alive(spark: SparkSession) -> bool:
    """Whether the driver JVM still answers."""
    try:
        spark.sparkContext.startTime  # noqa: B018 (a call into the JVM)
    except (ConnectionError, Py4JNetworkError):
        return False
    return True


def _stop_all(supervisor: Supervisor, spark: SparkSession, timeout: float) -> str | None:
    """Stop every query and take their last events; :data:`JVM_GONE` when the JVM
    cannot be reached any more (then there is nothing left to stop)."""
    try:
        supervisor.stop(timeout)
        flush_listener_bus(spark)
    except (ConnectionError, Py4JNetworkError):
        log.debug("the JVM is gone", exc_info=True)
        return JVM_GONE
    return None


def run_end(report: RunReport, *, stopped: bool, error: str | None = None) -> dict[str, Any]:
    """The event that closes a run: ``run_failed`` when it could not start (``error``) or
    gave a query up, ``run_stopped`` when asked to stop, else ``run_finished``;
    ``input_rows`` are the records its flows read, ``output_rows`` the rows they wrote
    (see :func:`_rows_read`)."""
    rows = {"input_rows": _rows_read(report), "output_rows": _rows_written(report),
            **{role: _side_rows(report, role) for role in ("quarantined", "late")}}  # fmt: skip
    if error is not None or report.failed:
        message = error or failures(report)
        return {"event": "run_failed", **rows, "message": message}
    kind = "run_stopped" if stopped else "run_finished"
    return {"event": kind, **rows, "message": _summary(report)}


def failures(report: RunReport) -> str:
    """Every query a run gave up, with its error, on one line."""
    return "; ".join(f"query {outcome.name} failed: {outcome.error}" for outcome in report.failed)


def _defers_late(slot: Supervised) -> bool:
    """Whether ``slot``'s late-events query waits for its flow's main query to finish:
    in a run that ends, when no batch of the main query has read input under a watermark
    yet (a flow's first catch-up), so that the query starts only if this run's batches
    did (``late.late_possible``); its flow reads one source, so a later late-events query
    tells the input read before the first watermark apart by its lineage."""
    output, sink = slot.output, slot.output.sink
    if output.role != "late" or not output.trigger.terminates:
        return False
    if not is_side_query(slot.flow, output) or not isinstance(sink, LateEventsSink):
        return False
    main = sink.main
    return main.source is not None and main.prepared and not late_possible(main.checkpoint)


def _deferred(plan: Plan, flow: FlowPlan) -> bool:
    """Whether ``flow`` waits for its upstream flows: only when its trigger ends, since an
    always-on flow follows its upstream tables as they grow."""
    return flow.outputs[0].trigger.terminates and bool(plan.upstream(flow))


def plan_monitor(plan: Plan) -> Monitor:
    """The monitor of a plan's queries; the sinks' resolved credentials (a PostgreSQL
    DSN) are redacted from its events. Resolving them first also fails a run whose
    database is unknown before any query starts."""
    # A real-time batch lasts its checkpoint interval by design: no alert for that.
    triggers = {
        output.spark_name: 0.0 if output.trigger.real_time else output.trigger.interval_seconds
        for output in plan.outputs
    }
    secrets = [secret for output in plan.outputs for secret in output.sink.secrets()]
    return Monitor(plan.spec, plan.root, triggers, secrets, file_probes(plan))


def file_probes(plan: Plan) -> dict[str, FileSourceProbe]:
    """Where each query reading files reads, so the monitor can measure its backlog."""
    return {
        output.spark_name: FileSourceProbe(
            flow.source_path, output.checkpoint, flow.source.glob, flow.source.recursive
        )
        for flow in plan.flows
        if flow.source.is_file_source and flow.source_path is not None
        for output in flow.outputs
    }


def _running(slots: list[Supervised]) -> Started:
    return [(slot.output, slot.query) for slot in slots if slot.query is not None]


def _damaged_file(flow: FlowPlan, path: Path, damage: str) -> str:
    """What to tell the user when a flow's source holds a damaged gzip file."""
    sources = [name for name, folder in flow.inputs if folder and path.is_relative_to(folder)]
    source = sources[0] if sources else flow.source_name
    return (
        f"{path} is a damaged gzip file ({damage}); set compression: gzip on source "
        f"{source} to quarantine such a file (Spark's reader stops the query at it)"
    )


def _message(exception: object) -> str:
    """The error's first line; past a wrapper that only says a write failed (a Delta
    write's ``TASK_WRITE_FAILED``), the first line of the cause that says why."""
    seen: object | None = exception
    for _ in range(20):
        line = first_line(getattr(seen, "desc", None) or str(seen))
        cause = getattr(seen, "_cause", None)
        if "[TASK_WRITE_FAILED]" not in line or cause is None:
            return line
        seen = cause
    return line


def _rows_read(report: RunReport) -> int:
    """The rows a run's flows read: their main queries' (side queries read them again,
    or skip them, depending on timing)."""
    return sum(query.input_rows for query in report.queries if query.role == "main")


def _rows_written(report: RunReport) -> int:
    """The rows a run's flows wrote to their own tables (their main queries'; a flow's
    further sinks write the same output again, each on its query's line)."""
    return sum(query.output_rows for query in report.queries if query.role == "main")


def _side_rows(report: RunReport, kept: str) -> int:
    """The rows a run's side queries kept: ``quarantined`` or ``late``."""
    role = {"quarantined": "quarantine", "late": "late"}[kept]
    return sum(query.output_rows for query in report.queries if query.role == role)


def _summary(report: RunReport) -> str:
    failed = len(report.failed)
    return (
        f"{len(report.queries)} queries, {_rows_read(report)} records read, "
        f"{_rows_written(report)} rows written, {_side_rows(report, 'quarantined')} "
        f"quarantined, {_side_rows(report, 'late')} late, {failed} failed"
    )
