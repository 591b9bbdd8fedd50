"""IoT signals: running averages per device and 10-minute windows sliding every 5.

The seeds' watermarking example. ``device_averages`` keeps a running count and average
per device (no watermark: one state row per device). The flow ``signal_windows``
computes the windowed statistics (watermark 10 minutes) once and writes them to three
sinks, one query each: ``serving`` upserts every changed window into PostgreSQL's
``signal_windows`` (update mode), ``final`` appends each window to the lake's
``signal_windows_final`` once the watermark has closed it (append mode: finalized
windows only), and ``live`` keeps the whole result as the memory table
``signal_windows_live`` for interactive SQL (complete mode, where Spark keeps every
window and the watermark drops nothing, so it also counts the events the other two drop
as too late). The flow has one quarantine and one count of its records.
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


@pipeline.flow(
    source="signals",
    sinks={
        # every changed window, upserted (the flow's first sink: its query and checkpoint)
        "serving": {
            "format": "postgres",
            "table": "signal_windows",
            "key": ["deviceId", "window_start", "window_end"],
            "output_mode": "update",
        },
        # each window once the watermark has closed it
        "final": {"table": "signal_windows_final", "output_mode": "append"},
        # the whole result, for interactive SQL
        "live": {"format": "memory", "table": "signal_windows_live", "output_mode": "complete"},
    },
    parse=signal_events,
    schema=SIGNAL_SCHEMA,
    event_time=RULE,
    description=f"count and average per device, {WINDOW} windows every {SLIDE}",
)
def signal_windows(events: DataFrame, event_time: EventTime) -> DataFrame:
    """Count and average per device and window, under the flow's event-time rule."""
    assert event_time.window is not None  # RULE declares one; the spec may only change it
    return windowed_signals(
        events, window=event_time.window, slide=event_time.slide, delay=event_time.lateness
    )


APP = pipeline.app
