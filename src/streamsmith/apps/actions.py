"""Phone actions into PostgreSQL: the seeds' first example, exactly once.

Events ``(phone_id, time, action)`` arrive as JSON lines (files by default, or Kafka);
open and close actions are counted per 1-hour window of ``time`` (``action_counts``) and
per 1-hour window sliding every 5 minutes (``action_counts_sliding``), both kept in
PostgreSQL in update mode, upserted by ``(action, window_start, window_end)`` with a
ledger of micro-batches, so a replay after a crash never counts twice. Malformed events
go to ``action_counts_quarantine``.

As in the seeds' scenario ("a phone might upload its data hours late if it's out of
coverage ... we will simply update its respective row"), an event may be a day late and
still update its window: the watermark trails the newest event time by ``LATENESS``, so
Spark keeps every window of the last day in state (24 one-hour windows per action for
``action_counts``, 288 overlapping ones for the sliding flow). Events later than that go
to ``action_counts_late`` and ``action_counts_sliding_late``. A lateness of your own:
``--set flows.action_counts.event_time.lateness=2h``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from streamsmith.api import EventTime, Pipeline
from streamsmith.schemas.actions import ACTION_SCHEMA
from streamsmith.transforms.actions import TIME, action_events, counts_per_window

WINDOW = "1 hour"
SLIDE = "5 minutes"
LATENESS = "1 day"
KEY = ["action", "window_start", "window_end"]


def _counts_into(table: str) -> dict[str, object]:
    return {"format": "postgres", "table": table, "key": KEY, "output_mode": "update"}


pipeline = Pipeline(
    "actions",
    description="phone open/close actions counted per hour, exactly once into PostgreSQL",
    sources={"actions": {"format": "jsonl", "path": "input/actions"}},
    trigger="interval=10s",
    input_hint="e.g. `streamsmith generate actions --to {path}`",
)


@pipeline.flow(
    source="actions",
    sink=_counts_into("action_counts"),
    parse=action_events,
    schema=ACTION_SCHEMA,
    event_time=EventTime(TIME, LATENESS, WINDOW),
    description=f"count per action and {WINDOW} window of time",
)
def action_counts(events: DataFrame) -> DataFrame:
    return counts_per_window(events)


@pipeline.flow(
    source="actions",
    sink=_counts_into("action_counts_sliding"),
    parse=action_events,
    schema=ACTION_SCHEMA,
    event_time=EventTime(TIME, LATENESS, WINDOW, SLIDE),
    quarantine=False,  # the same events are quarantined by action_counts
    description=f"count per action and {WINDOW} window sliding every {SLIDE}",
)
def action_counts_sliding(events: DataFrame) -> DataFrame:
    return counts_per_window(events)


APP = pipeline.app
