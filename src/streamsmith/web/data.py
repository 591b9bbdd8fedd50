"""What the dashboard shows, computed from the event log alone (no Spark needed).

Per query: the status row of ``streamsmith status`` and one point per batch of the
series the seeds chart — input vs processing rate, batch duration, watermark delay,
state rows, source lag, quarantined and late rows, records failing expectations; plus
the latest alerts, failures, restarts and give-ups of every query.
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

    def add(self, event: Mapping[str, Any]) -> None:
        """Fold one event (events come oldest first)."""
        self.status.add(event)
        kind = event.get("event")
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
        return {
            "queries": [status.as_dict() for status in self.status.statuses()],
            "series": {query: list(points.values()) for query, points in self.series.items()},
            "incidents": list(self.incidents)[::-1],
        }
