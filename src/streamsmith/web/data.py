"""What the dashboard shows, computed from the event log alone (no Spark needed).

Per query: the status row of ``streamsmith status`` and one point per batch of the
series the seeds chart — input vs processing rate, batch duration, watermark delay,
state rows, source lag, quarantined and late rows, records failing expectations; plus
the latest alerts, failures, restarts and give-ups of every query; and each app's
dependency graph (sources, flows, materialized views) as its latest run recorded it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from streamsmith.monitor.status import StatusFold

SERIES = (
    "input_rate",
    "process_rate",
    "batch_ms",
    "watermark_delay_s",
    "state_rows",
    "lag",
    "quarantined",
    "late",
    "input_rows",
    "latency_p50_ms",
    "latency_p99_ms",
)
INCIDENTS = (
    "alert",
    "failure",
    "restart",
    "gave_up",
    "schema_change",
    "notify_failed",
    "monitor_error",
    "run_failed",
    "run_skipped",
)
MAX_POINTS = 500  # per query: the latest batches
MAX_INCIDENTS = 100


class DashboardFold:
    """The event log folded into what the dashboard shows, carried on event by event: a
    page refreshed every few seconds reads only what the log gained (a day-old log is
    hundreds of MB). It keeps the statuses' fold, the latest batches per query and the
    latest incidents, nothing older."""

    def __init__(self) -> None:
        self.status = StatusFold()
        self.series: dict[str, dict[tuple[Any, Any], dict[str, Any]]] = {}
        self.incidents: deque[dict[str, Any]] = deque(maxlen=MAX_INCIDENTS)
        self.graphs: dict[str, list[dict[str, Any]]] = {}  # per app, its latest run's

    def add(self, event: Mapping[str, Any]) -> None:
        """Fold one event (events come oldest first)."""
        self.status.add(event)
        kind = event.get("event")
        if kind == "run_started" and event.get("graph") and event.get("app"):
            self.graphs[str(event["app"])] = list(event["graph"])
        if kind in INCIDENTS:
            keys = ("time", "app", "query", "event", "rule", "message")
            self.incidents.append({key: event.get(key) for key in keys})
        if kind != "progress" or not event.get("query"):
            return
        point = {"batch_id": event.get("batch_id"), "time": event.get("batch_time")}
        point.update({name: event.get(name) for name in SERIES})
        rules = event.get("expectations")
        point["expectations_failed"] = (
            sum(int(counts.get("failed") or 0) for counts in rules.values()) if rules else None
        )
        points = self.series.setdefault(str(event["query"]), {})
        points[(event.get("query_id"), event.get("batch_id"))] = point  # a replayed batch once
        if len(points) > MAX_POINTS:
            del points[next(iter(points))]

    def data(self) -> dict[str, Any]:
        """The page's data: the query rows (with the watermark delay put for people), the
        series of the flows' own queries, then their quarantine and late queries', the
        latest incidents first, and each app's dependency graph (its edges)."""
        queries = [
            {**status.as_dict(), "watermark_behind": behind(status.watermark_delay_s)}
            for status in self.status.statuses()
        ]
        ordered = sorted(self.series.items(), key=lambda item: _role(item[0]))
        return {
            "queries": queries,
            "series": {query: list(points.values()) for query, points in ordered},
            "incidents": list(self.incidents)[::-1],
            "graphs": dict(sorted(self.graphs.items())),
        }


def _role(query: str) -> int:
    """0 for a flow's own query, 1 for its quarantine query, 2 for its late-events one."""
    return next((n for n, role in ((1, ".quarantine"), (2, ".late")) if query.endswith(role)), 0)


_UNITS = (("years", 365.25 * 86400), ("days", 86400.0), ("hours", 3600.0))


def behind(seconds: float | None) -> str | None:
    """How far a watermark is behind its batch's time, as a person reads it: events older
    than that are late. ``42 s behind``, ``1.5 min behind``, ``25.9 years behind`` (old
    data replayed: the watermark follows the events' time, not the clock)."""
    if seconds is None:
        return None
    for unit, size in _UNITS:
        if seconds >= size:
            return f"{seconds / size:.1f} {unit} behind"
    if seconds >= 60:
        return f"{round(seconds / 60, 1):g} min behind"
    return f"{round(seconds, 1):g} s behind"
