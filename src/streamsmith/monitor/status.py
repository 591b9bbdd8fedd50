"""``streamsmith status``: one row per query, from the event log alone.

It works while the app runs (the log is appended batch by batch) and after it ended,
crashed or was killed: a query whose last word is "started" but whose process is gone
is reported as ``stopped (process gone)``.

Runs (``run_started`` ... ``run_finished``, ``run_failed``, ``run_stopped``) name their
queries. A scheduled query's row carries its schedule (:class:`ScheduleStatus`: the cron
expression, its last run's due time and how it ended, the next due time); between runs
its state is ``scheduled`` (``stopped`` once its process stopped). The maintenance of a
flow's tables (``maintenance``, ``maintenance_failed``) shows on its main query's row.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

# The supervisor's and Spark's lifecycle events, and the state each leaves a query in.
_STATES = {
    "started": "active",
    "restart": "active",
    "failure": "restarting",
    "gave_up": "failed",
    "side_waits": "restarting",  # a side query stopped to wait for its main query's commit
}
# How each run event leaves the run's queries' last run.
_RUN_STATES = {
    "run_started": "running",
    "run_finished": "finished",
    "run_failed": "failed",
    "run_stopped": "stopped",
}


@dataclass(frozen=True)
class ScheduleStatus:
    """A scheduled query's runs: ``cron``, the due time of its ``last_run`` and how it
    ended (``last_run_state``: running, finished, nothing new, failed, stopped), and the
    ``next_run`` due (None once its process stopped)."""

    cron: str
    last_run: str | None
    last_run_state: str | None
    next_run: str | None


@dataclass(frozen=True)
class QueryStatus:
    """What ``status`` prints for one query."""

    app: str
    query: str
    state: str
    batches: int
    last_batch_time: str | None
    input_rate: float | None
    process_rate: float | None
    lag: int | None
    watermark_delay_s: float | None
    state_rows: int | None
    quarantined: int
    late: int
    expectations: dict[str, dict[str, int]]
    restarts: int
    last_error: str | None
    schedule: ScheduleStatus | None = None
    schema_changes: int = 0  # new schema versions its source gained while it ran
    # Its tables' last OPTIMIZE and VACUUM: "<table> <operation>" -> "<time>: <outcome>".
    maintenance: dict[str, str] = field(default_factory=dict)
    # A Kafka-sourced flow's last batch: ms from a record's Kafka timestamp to processing.
    latency_p50_ms: int | None = None
    latency_p99_ms: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def query_statuses(
    events: Iterable[Mapping[str, Any]], alive: Callable[[int], bool] | None = None
) -> list[QueryStatus]:
    """Fold the event log (oldest first) into one status per (app, query).

    ``alive(pid) -> bool`` says whether a process still runs (default: a signal-0 check).
    Counts are over distinct batches, so a batch that ran twice across a restart is
    counted once.
    """
    fold = StatusFold()
    for event in events:
        fold.add(event)
    return fold.statuses(alive)


# What a query's row shows of its last batch.
_LAST = ("batch_time", "input_rate", "process_rate", "lag", "watermark_delay_s", "state_rows",
         "latency_p50_ms", "latency_p99_ms")  # fmt: skip


@dataclass
class StatusFold:
    """The event log folded so far, as plain JSON data (``entries``), so a fold can be
    kept and carried on with the events written since (see ``monitor.status_cache``):
    a day of an always-on app is about a million events, too many to read per look.

    A batch's counts are kept per query (``query_id``, the same across restarts) for its
    newest batch only: after a restart a query runs its last batch again with the same
    id, never an older one, so the newest event of that id replaces its counts and older
    ids are counted already."""

    entries: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, event: Mapping[str, Any]) -> None:
        """Fold one event (events come oldest first)."""
        kind = str(event.get("event"))
        if kind in _RUN_STATES or kind in ("scheduled", "unscheduled", "run_skipped"):
            for query in event.get("queries") or ():
                _fold_run(self._entry(event, query), event, kind)
            return
        query = event.get("query")
        if not query:
            return
        entry = self._entry(event, query)
        if kind in _STATES:
            entry["state"] = _STATES[kind]
            entry["pid"] = event.get("pid")
        if kind == "restart":
            entry["restarts"] += 1
        if kind == "schema_change":
            entry["schema_changes"] += 1
        if kind in ("maintenance", "maintenance_failed"):
            which = f"{event.get('table')} {event.get('operation')}"
            failed = "failed " if kind == "maintenance_failed" else ""
            done = f"{failed}{event.get('time')}: {event.get('message')}"
            entry.setdefault("maintenance", {})[which] = done
            return
        if kind == "terminated" and entry["state"] != "restarting":
            # Spark's event may arrive after the supervisor scheduled the restart
            entry["state"] = "failed" if event.get("message") else "stopped"
        if kind in ("failure", "gave_up") or (kind == "terminated" and event.get("message")):
            waiting = "MainQueryBehind" in str(event.get("message"))  # not an error of its own
            entry["error"] = None if waiting else event.get("message")
        if kind == "progress":
            _fold_batch(entry, event)

    def statuses(self, alive: Callable[[int], bool] | None = None) -> list[QueryStatus]:
        """One status per (app, query), in the order they first appeared."""
        is_alive = alive or process_alive
        return [_status(entry, is_alive) for entry in self.entries.values()]

    def _entry(self, event: Mapping[str, Any], query: str) -> dict[str, Any]:
        key = f"{event.get('app')}\x1f{query}"
        blank = {"app": str(event.get("app")), "query": str(query), "state": "unknown",
                 "batches": 0, "query_ids": {}, "quarantined": 0, "late": 0, "expectations": {},
                 "restarts": 0, "error": None, "pid": None, "schema_changes": 0}  # fmt: skip
        return self.entries.setdefault(key, blank)


def _fold_batch(entry: dict[str, Any], event: Mapping[str, Any]) -> None:
    """One batch's progress into its query's counts (see :class:`StatusFold`)."""
    query_id = str(event.get("query_id"))
    batch = int(event.get("batch_id") or 0)
    newest = entry["query_ids"].get(query_id)
    if newest is not None and batch < newest["batch"]:
        return  # counted already
    counts = {"quarantined": int(event.get("quarantined") or 0),
              "late": int(event.get("late") or 0),
              "expectations": event.get("expectations") or {}}  # fmt: skip
    if newest is not None and batch == newest["batch"]:
        _count(entry, newest["counts"], -1)  # the same batch again: its newest counts
    else:
        entry["batches"] += 1
    _count(entry, counts, 1)
    entry["query_ids"][query_id] = {"batch": batch, "counts": counts}
    entry["last"] = {name: event.get(name) for name in _LAST}


def _count(entry: dict[str, Any], counts: Mapping[str, Any], sign: int) -> None:
    entry["quarantined"] += sign * counts["quarantined"]
    entry["late"] += sign * counts["late"]
    for name, judged in counts["expectations"].items():
        total = entry["expectations"].setdefault(name, {"passed": 0, "failed": 0})
        total["passed"] += sign * int(judged.get("passed") or 0)
        total["failed"] += sign * int(judged.get("failed") or 0)


def _fold_run(entry: dict[str, Any], event: Mapping[str, Any], kind: str) -> None:
    """One run event into the status of one of the run's queries."""
    scheduled = bool(event.get("schedule"))
    if scheduled:
        entry["schedule"], entry["next_run"] = event.get("cron"), event.get("next_due")
    if kind in _RUN_STATES:
        if kind == "run_started":
            entry["last_run"] = event.get("scheduled_for") or event.get("time")
        # (a failed run's message names the queries that failed: their own events say it)
        entry["last_run_state"] = "nothing new" if event.get("nothing_new") else _RUN_STATES[kind]
    if kind in ("run_started", "run_skipped"):
        return
    if kind == "unscheduled":  # its process stopped
        entry["state"], entry["next_run"] = "stopped", None
    elif scheduled:  # between runs, while its process lives
        entry["state"], entry["pid"] = "scheduled", event.get("pid")
    elif entry["state"] == "unknown":  # a run that started no query (nothing new)
        entry["state"] = "stopped"


def _status(entry: Mapping[str, Any], alive: Callable[[int], bool]) -> QueryStatus:
    state = entry["state"]
    live = ("active", "restarting", "scheduled")
    if state in live and entry["pid"] and not alive(int(entry["pid"])):
        state = "stopped (process gone)"
    last: Mapping[str, Any] = entry.get("last") or {}
    return QueryStatus(
        app=entry["app"],
        query=entry["query"],
        state=state,
        batches=entry["batches"],
        last_batch_time=last.get("batch_time"),
        input_rate=last.get("input_rate"),
        process_rate=last.get("process_rate"),
        lag=last.get("lag"),
        watermark_delay_s=last.get("watermark_delay_s"),
        state_rows=last.get("state_rows"),
        quarantined=entry["quarantined"],
        late=entry["late"],
        expectations={name: dict(n) for name, n in entry["expectations"].items()},
        restarts=entry["restarts"],
        last_error=entry["error"],
        schedule=_schedule_status(entry),
        schema_changes=entry["schema_changes"],
        maintenance=dict(entry.get("maintenance") or {}),
        latency_p50_ms=last.get("latency_p50_ms"),
        latency_p99_ms=last.get("latency_p99_ms"),
    )


def _schedule_status(entry: Mapping[str, Any]) -> ScheduleStatus | None:
    if not entry.get("schedule"):
        return None
    return ScheduleStatus(
        cron=str(entry["schedule"]),
        last_run=entry.get("last_run"),
        last_run_state=entry.get("last_run_state"),
        next_run=entry.get("next_run"),
    )


def process_alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
