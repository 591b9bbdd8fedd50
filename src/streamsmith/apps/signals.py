"""IoT signals: running averages per device and 10-minute windows sliding every 5.

The seeds' watermarking example. ``device_averages`` keeps a running count and average
per device (no watermark: one state row per device). The windowed statistics (watermark
10 minutes) go three ways: ``signal_windows`` upserts every changed window into
PostgreSQL (update mode), ``signal_windows_final`` appends each window to the lake once
the watermark has closed it (append mode: finalized windows only), and
``signal_windows_live`` keeps the whole result as a memory table for interactive SQL
(complete mode, where Spark keeps every window and the watermark drops nothing, so it
also counts the events the other two drop as too late).
Late events within the watermark update their windows; older ones are dropped by Spark
and recorded in ``signal_windows_late``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from streamsmith.api import EventTime, Pipeline
from streamsmith.schemas.iot import SIGNAL_SCHEMA
from streamsmith.transforms.signals import TIME, device_averages, signal_events, windowed_signals

WINDOW = "10 minutes"
SLIDE = "5 minutes"
LATENESS = "10 minutes"
RULE = EventTime(TIME, LATENESS, WINDOW, SLIDE)

pipeline = Pipeline(
    "signals",
    description="IoT signals: running averages per device and sliding-window statistics",
    sources={"signals": {"format": "jsonl", "path": "input/signals"}},
    trigger="interval=10s",
    input_hint="e.g. `streamsmith generate signals --to {path}`",
)

pipeline.flow(
    device_averages,
    source="signals",
    sink={
        "format": "postgres",
        "table": "device_averages",
        "key": ["deviceId"],
        "output_mode": "update",
    },
    parse=signal_events,
    schema=SIGNAL_SCHEMA,
    stateful=True,
    quarantine=False,  # the same events are quarantined by signal_windows
    description="running count and average signal per device",
)


def signal_stats(events: DataFrame, event_time: EventTime) -> DataFrame:
    """Count and average per device and window, under the flow's event-time rule."""
    assert event_time.window is not None  # RULE declares one; the spec may only change it
    return windowed_signals(
        events, window=event_time.window, slide=event_time.slide, delay=event_time.lateness
    )


# Three flows over the same windows; the first quarantines and records late events for
# all of them, since they read the same events under the same rule.
for name, sink, description in (
    (
        "signal_windows",
        {
            "format": "postgres",
            "table": "signal_windows",
            "key": ["deviceId", "window_start", "window_end"],
            "output_mode": "update",
        },
        f"count and average per device, {WINDOW} windows every {SLIDE}",
    ),
    (
        "signal_windows_final",
        {"table": "signal_windows_final", "output_mode": "append"},
        "the same windows, appended once the watermark closes them",
    ),
    (
        "signal_windows_live",
        {"format": "memory", "table": "signal_windows_live", "output_mode": "complete"},
        "the same windows as an in-memory table for interactive SQL",
    ),
):
    first = name == "signal_windows"
    pipeline.flow(
        signal_stats,
        name=name,
        source="signals",
        sink=sink,
        parse=signal_events,
        schema=SIGNAL_SCHEMA,
        event_time=RULE,
        quarantine=first,
        record_late=first,
        description=description,
    )

APP = pipeline.app
