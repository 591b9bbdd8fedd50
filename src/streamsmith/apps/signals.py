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

from functools import partial

from streamsmith.runtime.app import App, EventTime, FlowDefinition
from streamsmith.schemas.iot import SIGNAL_SCHEMA
from streamsmith.transforms.signals import TIME, device_averages, signal_events, windowed_signals

WINDOW = "10 minutes"
SLIDE = "5 minutes"
DELAY = "10 minutes"
RULE = EventTime(TIME, DELAY, WINDOW, SLIDE)

DEFAULT_SPEC = {
    "app": "signals",
    "trigger": "interval=10s",
    "sources": {"signals": {"format": "jsonl", "path": "input/signals"}},
    "flows": {
        "device_averages": {
            "source": "signals",
            "sink": {
                "format": "postgres",
                "table": "device_averages",
                "key": ["deviceId"],
                "output_mode": "update",
            },
        },
        "signal_windows": {
            "source": "signals",
            "sink": {
                "format": "postgres",
                "table": "signal_windows",
                "key": ["deviceId", "window_start", "window_end"],
                "output_mode": "update",
            },
        },
        "signal_windows_final": {
            "source": "signals",
            "sink": {"table": "signal_windows_final", "output_mode": "append"},
        },
        "signal_windows_live": {
            "source": "signals",
            "sink": {"format": "memory", "table": "signal_windows_live", "output_mode": "complete"},
        },
    },
}

_windows = partial(windowed_signals, window=WINDOW, slide=SLIDE, delay=DELAY)


def _windowed_flow(name: str, description: str, *, first: bool = False) -> FlowDefinition:
    """One of the flows over the same windows; the first quarantines and records late
    events for all of them, since they read the same events under the same rule."""
    return FlowDefinition(
        name=name,
        prepare=signal_events,
        transform=_windows,
        description=description,
        record_schema=SIGNAL_SCHEMA,
        quarantine=first,
        event_time=RULE,
        stateful=True,
        record_late=first,
    )


APP = App(
    name="signals",
    description="IoT signals: running averages per device and sliding-window statistics",
    flows=(
        FlowDefinition(
            name="device_averages",
            prepare=signal_events,
            transform=device_averages,
            description="running count and average signal per device",
            record_schema=SIGNAL_SCHEMA,
            quarantine=False,  # the same events are quarantined by signal_windows
            stateful=True,
        ),
        _windowed_flow(
            "signal_windows",
            f"count and average per device, {WINDOW} windows every {SLIDE}",
            first=True,
        ),
        _windowed_flow(
            "signal_windows_final", "the same windows, appended once the watermark closes them"
        ),
        _windowed_flow(
            "signal_windows_live", "the same windows as an in-memory table for interactive SQL"
        ),
    ),
    default_spec=DEFAULT_SPEC,
    input_hint="e.g. `streamsmith generate signals --to {path}`",
)
