"""User activity, part one: the seeds' deduplication example (``pydeduplicated``).

Activity records (the heterogeneity human-activity dataset) are deduplicated on
``(User, event_time)`` with a 5-second watermark, then counted per user. The counts go
to PostgreSQL (complete mode: the table is replaced atomically each batch) and to the
memory table ``deduplicated`` for interactive SQL. Records behind the watermark are
dropped by Spark and recorded in ``user_counts_late``; so
``input = counted + late + duplicates`` reconciles.

Part two, the seeds' ``mapGroupsWithState`` example: ``activity_sessions`` holds each
user's sessions of one activity, first and last reading, closed by another activity, a
30-second gap, or the watermark (``streamsmith.stateful.sessions``). Its late readings are
the ones ``user_counts_late`` records (same input, same watermark).
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from streamsmith.api import EventTime, Pipeline
from streamsmith.schemas.activity import ACTIVITY_SCHEMA
from streamsmith.transforms.activity import (
    EVENT_TIME,
    activity_events,
    activity_sessions,
    deduplicated_counts,
)

LATENESS = "5 seconds"
SESSION_GAP = "30 seconds"
RULE = EventTime(EVENT_TIME, LATENESS)

pipeline = Pipeline(
    "activity",
    description="user activity deduplicated on (User, event_time) and counted per user",
    sources={"activity": {"format": "jsonl", "path": "input/activity"}},
    trigger="interval=10s",
    input_hint="e.g. `streamsmith generate activity --to {path}`",
)


@pipeline.flow(
    source="activity",
    sink={"format": "postgres", "table": "user_counts", "output_mode": "complete"},
    parse=activity_events,
    schema=ACTIVITY_SCHEMA,
    event_time=RULE,
    stateful=True,
    description=f"dropDuplicates(User, event_time) with a {LATENESS} watermark, per user",
)
def user_counts(events: DataFrame, event_time: EventTime) -> DataFrame:
    return deduplicated_counts(events, delay=event_time.lateness)


@pipeline.flow(
    source="activity",
    sink={"format": "memory", "table": "deduplicated", "output_mode": "complete"},
    parse=activity_events,
    schema=ACTIVITY_SCHEMA,
    event_time=RULE,
    stateful=True,
    quarantine=False,
    record_late=False,
    description="the same counts as the memory table of the seed's example",
)
def deduplicated(events: DataFrame, event_time: EventTime) -> DataFrame:
    return deduplicated_counts(events, delay=event_time.lateness)


@pipeline.flow(
    source="activity",
    sink={"table": "activity_sessions"},
    parse=activity_events,
    schema=ACTIVITY_SCHEMA,
    event_time=EventTime(EVENT_TIME, LATENESS, gap=SESSION_GAP),
    stateful=False,  # the processor appends each session once, when it closes
    quarantine=False,
    record_late=False,
    batch_arguments={"close_at_end": True},
    description=f"sessions of one activity per user, closed after a {SESSION_GAP} gap "
    "(transformWithStateInPandas, event-time timers)",
)
def sessions(events: DataFrame, event_time: EventTime, close_at_end: bool = False) -> DataFrame:
    assert event_time.gap is not None  # declared above; the spec may only change it
    return activity_sessions(
        events, gap=event_time.gap, delay=event_time.lateness, close_at_end=close_at_end
    )


APP = pipeline.app
