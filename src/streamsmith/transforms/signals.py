"""IoT signals: a running average per device and averages over sliding windows."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamsmith.schemas.iot import SIGNAL_SCHEMA
from streamsmith.transforms.events import flatten_window, parse_events, window_column

TIME = "eventTime"


def signal_events(source: DataFrame) -> DataFrame:
    """Typed ``(eventTime, deviceId, signal)`` events, tagged for quarantine."""
    return parse_events(source, SIGNAL_SCHEMA, required=(TIME, "deviceId", "signal"))


def device_averages(events: DataFrame) -> DataFrame:
    """Running count and average signal per device over every event so far.

    No watermark: the state is one row per device, and late events still count.
    """
    return events.groupBy("deviceId").agg(
        F.count("*").alias("events"), F.avg("signal").alias("avg_signal")
    )


def windowed_signals(
    events: DataFrame,
    window: str = "10 minutes",
    slide: str | None = "5 minutes",
    delay: str = "10 minutes",
) -> DataFrame:
    """Count and average signal per device and window of ``eventTime`` (sliding every
    ``slide``, or tumbling when it is None)."""
    stats = (
        events.withWatermark(TIME, delay)
        .groupBy(window_column(TIME, window, slide).alias("window"), "deviceId")
        .agg(F.count("*").alias("events"), F.avg("signal").alias("avg_signal"))
    )
    return flatten_window(stats)
