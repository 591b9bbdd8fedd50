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

from functools import partial

from streamsmith.runtime.app import App, EventTime, FlowDefinition
from streamsmith.schemas.activity import ACTIVITY_SCHEMA
from streamsmith.transforms.activity import (
    EVENT_TIME,
    activity_events,
    activity_sessions,
    deduplicated_counts,
)

DELAY = "5 seconds"
SESSION_GAP = "30 seconds"

DEFAULT_SPEC = {
    "app": "activity",
    "trigger": "interval=10s",
    "sources": {"activity": {"format": "jsonl", "path": "input/activity"}},
    "flows": {
        "user_counts": {
            "source": "activity",
            "sink": {"format": "postgres", "table": "user_counts", "output_mode": "complete"},
        },
        "deduplicated": {
            "source": "activity",
            "sink": {"format": "memory", "table": "deduplicated", "output_mode": "complete"},
        },
        "sessions": {
            "source": "activity",
            "sink": {"table": "activity_sessions"},
        },
    },
}

_counts = partial(deduplicated_counts, delay=DELAY)

APP = App(
    name="activity",
    description="user activity deduplicated on (User, event_time) and counted per user",
    flows=(
        FlowDefinition(
            name="user_counts",
            prepare=activity_events,
            transform=_counts,
            description=f"dropDuplicates(User, event_time) with a {DELAY} watermark, per user",
            record_schema=ACTIVITY_SCHEMA,
            event_time=EventTime(EVENT_TIME, DELAY),
            stateful=True,
        ),
        FlowDefinition(
            name="deduplicated",
            prepare=activity_events,
            transform=_counts,
            description="the same counts as the memory table of the seed's example",
            record_schema=ACTIVITY_SCHEMA,
            quarantine=False,
            event_time=EventTime(EVENT_TIME, DELAY),
            stateful=True,
            record_late=False,
        ),
        FlowDefinition(
            name="sessions",
            prepare=activity_events,
            transform=partial(activity_sessions, gap=SESSION_GAP, delay=DELAY),
            description=f"sessions of one activity per user, closed after a {SESSION_GAP} "
            "gap (transformWithStateInPandas, event-time timers)",
            record_schema=ACTIVITY_SCHEMA,
            quarantine=False,
            event_time=EventTime(EVENT_TIME, DELAY),
            record_late=False,
            batch_arguments={"close_at_end": True},
        ),
    ),
    default_spec=DEFAULT_SPEC,
    input_hint="e.g. `streamsmith generate activity --to {path}`",
)
