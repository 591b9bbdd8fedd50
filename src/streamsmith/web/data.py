"""What the dashboard shows, computed from the event log alone (no Spark needed).

Per query: the status row of ``streamsmith status`` and one point per batch of the
series the seeds chart — input vs processing rate, batch duration, watermark delay,
state rows, source lag, quarantined and late rows, records failing expectations; plus
the latest alerts, failures, restarts and give-ups of every query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from streamsmith.monitor.status import query_statuses

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


def dashboard_data(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The dashboard's JSON: statuses, per-batch series, and recent incidents."""
    series: dict[str, dict[tuple[Any, Any], dict[str, Any]]] = {}
    for event in events:
        if event.get("event") != "progress" or not event.get("query"):
            continue
        point = {"batch_id": event.get("batch_id"), "time": event.get("batch_time")}
        point.update({name: event.get(name) for name in SERIES})
        rules = event.get("expectations")
        point["expectations_failed"] = (
            sum(int(counts.get("failed") or 0) for counts in rules.values()) if rules else None
        )
        key = (event.get("query_id"), event.get("batch_id"))
        series.setdefault(str(event["query"]), {})[key] = point  # a replayed batch once
    incidents = [
        {key: event.get(key) for key in ("time", "app", "query", "event", "rule", "message")}
        for event in events
        if event.get("event") in INCIDENTS
    ]
    return {
        "queries": [status.as_dict() for status in query_statuses(events)],
        "series": {query: list(points.values())[-MAX_POINTS:] for query, points in series.items()},
        "incidents": incidents[-MAX_INCIDENTS:][::-1],
    }
