"""User activity (the seeds' heterogeneity dataset): deduplicated events per user."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamsmith.schemas.activity import ACTIVITY_SCHEMA
from streamsmith.transforms.events import parse_events

EVENT_TIME = "event_time"
_NANOS_PER_MICRO = 1000


def activity_events(source: DataFrame) -> DataFrame:
    """Typed activity records plus ``event_time`` (``Creation_Time`` is epoch nanoseconds),
    tagged for quarantine."""
    parsed = parse_events(
        source, ACTIVITY_SCHEMA, required=("User", "Creation_Time", "Index", "gt")
    )
    micros = F.floor(F.col("Creation_Time") / _NANOS_PER_MICRO)
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
