"""Scheduled catch-ups in one warm process: ``schedule: "<cron>"`` with available-now.

``streamsmith run`` on a spec with schedules keeps its Spark session and starts each
schedule's flows as one supervised catch-up run (``streamsmith.runtime.supervisor``) at
every due time, so a run pays neither a JVM nor a session. Flows without a schedule run
beside them as they would alone (always on, or one catch-up at start).

Each run is a run in the event log: ``run_started`` (with the time it was due), then
``run_finished``, ``run_failed`` (also an ``alert``, which is notified) or
``run_stopped``; a run that finds nothing new starts no query
(``streamsmith.runtime.catchup``). Like a Kubernetes CronJob:

- a due time passed while the process was down is made up once, at start, when the
  event log shows a run of that schedule before it (a first start waits for its first
  due time);
- a due time that comes while the schedule's previous run is still going is skipped
  (``run_skipped``, with the reason), never run twice at once;
- a failed run is recorded and alerted, and the next due time runs as usual.

The spec's table maintenance runs here too (``streamsmith.runtime.maintenance``): an
operation on a cron when it is due (one not made up after the process was down), one
``after_run`` when a run of its flow finished well; between the checks of the queries,
which keep running. A failed operation is recorded and alerted. So do materialized views
(``streamsmith.runtime.views``): on their cron, and after a run of a flow they read.

Times are UTC, from a :class:`Clock` that tests replace.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from croniter import croniter
from pyspark.sql import SparkSession

from streamsmith.config import parse_duration
from streamsmith.monitor.eventlog import read_events
from streamsmith.monitor.recorder import Monitor, first_line, flush_listener_bus
from streamsmith.runtime.catchup import nothing_new
from streamsmith.runtime.maintenance import TableMaintenance, failed, maintain, run_after
from streamsmith.runtime.plan import FlowPlan, Plan, Schedule
from streamsmith.runtime.start import prepare_flows, wait_for
from streamsmith.runtime.supervisor import (
    PipelineError,
    QueryOutcome,
    RunReport,
    Supervisor,
    failures,
    plan_monitor,
    run_end,
)
from streamsmith.runtime.views import refresh, refresh_failures

log = logging.getLogger(__name__)

# Scheduled time passes this many times faster than real time: a testing aid, so a test
# of the CLI sees every-minute runs come seconds apart.
SPEEDUP_ENV = "STREAMSMITH_SCHEDULE_SPEEDUP"
_POLL_SECONDS = 0.5


class Clock(Protocol):
    """Where the scheduler reads the time (UTC)."""

    def now(self) -> datetime: ...


class SystemClock:
    """The machine's clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)


@dataclass
class ManualClock:
    """A clock that says what it was last set to: tests and benchmarks move it."""

    moment: datetime

    def now(self) -> datetime:
        return self.moment


@dataclass
class FastClock:
    """A clock that runs ``speedup`` times faster than real time from when it is made."""

    speedup: float
    origin: datetime = field(default_factory=lambda: datetime.now(UTC))
    _started: float = field(default_factory=time.monotonic)

    def now(self) -> datetime:
        elapsed = (time.monotonic() - self._started) * self.speedup
        return self.origin + timedelta(seconds=elapsed)


def default_clock() -> Clock:
    """The system clock, or a :class:`FastClock` when ``$STREAMSMITH_SCHEDULE_SPEEDUP``
    is set."""
    speedup = os.environ.get(SPEEDUP_ENV)
    return FastClock(float(speedup)) if speedup else SystemClock()


def due_at_or_before(cron: str, moment: datetime) -> datetime:
    """The latest due time of ``cron`` at or before ``moment``."""
    previous: datetime = croniter(cron, moment).get_prev(datetime)
    following: datetime = croniter(cron, previous).get_next(datetime)
    return following if following <= moment else previous


def due_after(cron: str, moment: datetime) -> datetime:
    """The first due time of ``cron`` after ``moment``."""
    following: datetime = croniter(cron, moment).get_next(datetime)
    return following


def stamp(moment: datetime) -> str:
    """A due time as the event log writes times."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def last_due_times(events: Iterable[Mapping[str, Any]]) -> dict[str, datetime]:
    """The due time of each schedule's latest run (started or skipped) in the log."""
    found: dict[str, datetime] = {}
    for event in events:
        if event.get("event") in ("run_started", "run_skipped") and event.get("scheduled_for"):
            due = datetime.fromisoformat(str(event["scheduled_for"]).replace("Z", "+00:00"))
            name = str(event.get("schedule"))
            found[name] = max(due, found.get(name, due))
    return found


@dataclass
class ScheduledRun:
    """One run of a schedule: its due time and the supervisor of its queries."""

    due: datetime
    supervisor: Supervisor


class Scheduler:
    """Runs a plan's schedules (and its unscheduled flows) in one session; see the
    module docstring. Drive it with :meth:`start`, then :meth:`step` and :meth:`wait`
    until :meth:`step` says the run is over, then :meth:`stop`."""

    def __init__(
        self, spark: SparkSession, plan: Plan, monitor: Monitor, clock: Clock | None = None
    ) -> None:
        self.spark = spark
        self.plan = plan
        self.monitor = monitor
        self.clock = clock or SystemClock()
        self.schedules = plan.schedules
        unscheduled = tuple(flow for flow in plan.flows if flow.schedule is None)
        self.always = Supervisor(spark, plan.only(unscheduled), monitor) if unscheduled else None
        self.next_due: dict[Schedule, datetime] = {}
        self.running: dict[Schedule, ScheduledRun] = {}
        self.totals: dict[str, QueryOutcome] = {
            output.query_name: QueryOutcome(output.query_name) for output in plan.outputs
        }
        self.maintenance = plan.maintenance_crons
        self.maintenance_due: dict[str, datetime] = {}
        self.view_crons = plan.view_crons
        self.view_due: dict[str, datetime] = {}
        self._always_maintained = False

    def health(self) -> dict[str, str]:
        """Each query's state for ``/health``: a scheduled query between runs is waiting."""
        states = {output.spark_name: "waiting" for output in self.plan.outputs}
        for run in self.running.values():
            states.update(run.supervisor.health())
        if self.always is not None:
            states.update(self.always.health())
        return states

    def start(self) -> None:
        """Check the flows' code once, make up a missed run, and start unscheduled flows."""
        prepare_flows(self.spark, self.plan)
        now = self.clock.now()
        last = last_due_times(read_events(self.plan.root, self.plan.spec.app))
        for schedule, flows in self.schedules.items():
            self.next_due[schedule] = due_after(schedule.cron, now)
            missed = due_at_or_before(schedule.cron, now)
            if schedule.name in last and last[schedule.name] < missed:
                self._start_run(schedule, missed, f"missed at {stamp(missed)}: run once on start")
            else:
                names = ", ".join(flow.name for flow in flows)
                self._record(schedule, {"event": "scheduled"}, f"flows {names}")
        for cron in self.maintenance:
            self.maintenance_due[cron] = due_after(cron, now)
        for cron in self.view_crons:
            self.view_due[cron] = due_after(cron, now)
        if self.always is not None:
            self.always.start_all()

    def step(self) -> bool:
        """Start the runs now due and check the running ones once; False when the
        unscheduled flows failed for good (the scheduled ones never end the process)."""
        now = self.clock.now()
        for schedule in self.schedules:
            if now < self.next_due[schedule]:
                continue
            due = due_at_or_before(schedule.cron, now)  # several passed at once: the latest
            self.next_due[schedule] = due_after(schedule.cron, now)
            running = self.running.get(schedule)
            if running is not None:
                skipped = {"event": "run_skipped", "scheduled_for": stamp(due)}
                reason = f"the run due at {stamp(running.due)} is still going"
                self._record(schedule, skipped, reason)
            else:
                self._start_run(schedule, due, f"due at {stamp(due)}")
        for cron, tasks in self.maintenance.items():
            if now >= self.maintenance_due[cron]:
                self.maintenance_due[cron] = due_after(cron, now)
                for task in tasks:
                    self._alert_failed(maintain(task, task.operations(cron), self.plan.root,
                                                self.monitor.record, cron))  # fmt: skip
        for cron, views in self.view_crons.items():
            if now >= self.view_due[cron]:
                self.view_due[cron] = due_after(cron, now)
                self._alert_failed(refresh(self.spark, self.plan.root, views,
                                           self.monitor.record, cron))  # fmt: skip
        for schedule, run in list(self.running.items()):
            if not run.supervisor.step():
                self._end_run(schedule, stopped=False)
        if self.always is not None and not self.always.step():
            ok = not self.always.report().failed
            if ok and not self._always_maintained:  # the unscheduled catch-ups are done
                self._always_maintained = True
                self._after_run(self.always.plan.flows, "run")
            return ok
        return True

    def _after_run(self, flows: Iterable[FlowPlan], why: str) -> None:
        """The end of a catch-up run of ``flows``: their tables' after-run maintenance,
        then the views reading them."""
        tasks: list[TableMaintenance] = [task for flow in flows for task in flow.maintenance]
        self._alert_failed(run_after(tasks, self.plan.root, self.monitor.record))
        views = self.plan.views_after(flows)
        self._alert_failed(refresh(self.spark, self.plan.root, views, self.monitor.record, why))

    def _alert_failed(self, events: Iterable[Mapping[str, Any]]) -> None:
        events = list(events)
        rules = (("maintenance_failed", failed(events)),
                 ("view_refresh_failed", refresh_failures(events)))  # fmt: skip
        for rule, messages in rules:
            for message in messages:
                self.monitor.record({"event": "alert", "rule": rule, "message": message})

    def wait(self, stop: threading.Event) -> None:
        """Block until a query ends, ``stop`` is set, or the poll interval passes."""
        supervisors = [run.supervisor for run in self.running.values()]
        supervisors += [self.always] if self.always is not None else []
        for supervisor in supervisors:
            for slot in supervisor.slots:
                if slot.query is not None and slot.state == "active":
                    wait_for(slot.query, _POLL_SECONDS)
                    return
        stop.wait(_POLL_SECONDS)

    def stop(self) -> RunReport:
        """Stop every running query after its current batch; the report sums every run."""
        for schedule in list(self.running):
            self._end_run(schedule, stopped=True)
        for schedule in self.next_due:
            self._record(schedule, {"event": "unscheduled"}, "stopped: no further runs")
        if self.always is not None:
            self.always.stop(parse_duration(self.plan.spec.graceful_stop_timeout))
            self._add(self.always.report())
        report = RunReport(list(self.totals.values()))
        if self.always is not None:
            errors = {o.name: o.error for o in self.always.report().failed}
            for outcome in report.queries:
                outcome.error = errors.get(outcome.name)
        return report

    def _start_run(self, schedule: Schedule, due: datetime, why: str) -> None:
        sub_plan = self.plan.only(self.schedules[schedule])
        self._record(schedule, {"event": "run_started", "scheduled_for": stamp(due)}, why)
        reason = nothing_new(sub_plan)
        if reason is not None:
            end = {"event": "run_finished", "nothing_new": True, "input_rows": 0, "output_rows": 0}
            self._record(schedule, {**end, "scheduled_for": stamp(due)}, reason)
            return
        supervisor = Supervisor(self.spark, sub_plan, self.monitor)
        self.running[schedule] = ScheduledRun(due, supervisor)
        try:
            supervisor.start_all()
        except Exception as exc:  # the run failed, not the process: recorded and alerted
            log.warning("scheduled run %s could not start", schedule.name, exc_info=True)
            self._end_run(schedule, stopped=False, error=f"could not start: {first_line(str(exc))}")

    def _end_run(self, schedule: Schedule, *, stopped: bool, error: str | None = None) -> None:
        run = self.running.pop(schedule)
        run.supervisor.stop(parse_duration(self.plan.spec.graceful_stop_timeout))
        report = run.supervisor.report()
        flush_listener_bus(self.spark)
        self._add(report)
        end = run_end(report, stopped=stopped, error=error)
        written = self._record(schedule, {**end, "scheduled_for": stamp(run.due)}, end["message"])
        if written["event"] == "run_failed":
            message = f"scheduled run {schedule.name} due at {stamp(run.due)} failed: "
            message += str(written.get("message"))
            self.monitor.record({"event": "alert", "rule": "run_failed", "message": message})
        elif written["event"] == "run_finished":
            self._after_run(self.schedules[schedule], schedule.name)

    def _add(self, report: RunReport) -> None:
        for outcome in report.queries:
            total = self.totals[outcome.name]
            total.batches += outcome.batches
            total.input_rows += outcome.input_rows
            total.output_rows += outcome.output_rows

    def _record(self, schedule: Schedule, event: dict[str, Any], message: str) -> dict[str, Any]:
        flows = self.schedules[schedule]
        queries = [output.spark_name for flow in flows for output in flow.outputs]
        return self.monitor.record(
            {
                **event,
                "schedule": schedule.name,
                "cron": schedule.cron,
                "queries": queries,
                "next_due": stamp(self.next_due[schedule]),
                "message": message,
            }
        )


def run_schedules(
    spark: SparkSession, plan: Plan, stop: threading.Event | None = None, clock: Clock | None = None
) -> RunReport:
    """Run ``plan``'s schedules until ``stop`` is set (or its unscheduled flows fail for
    good: then :class:`PipelineError`, as :func:`~streamsmith.runtime.supervisor.supervise`)."""
    stop = stop or threading.Event()
    monitor = plan_monitor(plan)
    scheduler = Scheduler(spark, plan, monitor, clock or default_clock())
    monitor.attach(spark, scheduler.health)
    try:
        scheduler.start()
        while scheduler.step() and not stop.is_set():
            scheduler.wait(stop)
    finally:
        report = scheduler.stop()
        flush_listener_bus(spark)
        monitor.detach(spark)
    if report.failed:
        raise PipelineError(failures(report))
    return report
