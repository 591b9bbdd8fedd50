"""User activity (the seeds' heterogeneity dataset): deduplicated events per user."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamsmith.config import parse_duration
from streamsmith.schemas.activity import ACTIVITY_SCHEMA
from streamsmith.stateful.sessions import SESSION_OUTPUT, ActivitySessions
from streamsmith.transforms.events import parse_events

EVENT_TIME = "event_time"
_NANOS_PER_MICRO = 1000


def activity_events(source: DataFrame) -> DataFrame:
    """Typed activity records plus ``event_time`` (``Creation_Time`` is epoch nanoseconds),
    tagged for quarantine."""
    parsed = parse_events(
        source, ACTIVITY_SCHEMA, required=("User", "Creation_Time", "Index", "gt")
    )
    # Integer division: nanoseconds since 1970 exceed a double's 53 bits of precision.
    micros = F.expr(f"Creation_Time div {_NANOS_PER_MICRO}")
    return parsed.withColumn(EVENT_TIME, F.timestamp_micros(micros))


def deduplicated_counts(events: DataFrame, delay: str = "5 seconds") -> DataFrame:
    """Events per user after dropping repeats of ``(User, event_time)``: the seed's
    ``pydeduplicated`` query. The watermark bounds the keys remembered for dedup."""
    return (
        events.withWatermark(EVENT_TIME, delay)
        .dropDuplicates(["User", EVENT_TIME])
        .groupBy("User")
        .count()
    )


def activity_sessions(
    events: DataFrame,
    gap: str = "30 seconds",
    delay: str = "5 seconds",
    *,
    close_at_end: bool = False,
) -> DataFrame:
    """Closed sessions of one activity per user (see ``streamsmith.stateful.sessions``):
    the seed's first/last time per user and activity, with an inactivity ``gap``;
    ``close_at_end``: the input is all there is (a batch run), so sessions still open at
    its end are closed."""
    gap_ms = int(parse_duration(gap) * 1000)
    processor = ActivitySessions(gap_ms, EVENT_TIME, close_at_end=close_at_end)
    return (
        events.select("User", "gt", EVENT_TIME)
        .withWatermark(EVENT_TIME, delay)
        .groupBy("User")
        .transformWithStateInPandas(
            processor, SESSION_OUTPUT, outputMode="Append", timeMode="EventTime"
        )
    )
