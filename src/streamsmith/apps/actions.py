"""Phone actions into PostgreSQL: the seeds' first example, exactly once.

Events ``(phone_id, time, action)`` arrive as JSON lines (files by default, or Kafka);
open and close actions are counted per 1-hour window of ``time`` (``action_counts``) and
per 1-hour window sliding every 5 minutes (``action_counts_sliding``), both kept in
PostgreSQL in update mode, upserted by ``(action, window_start, window_end)`` with a
ledger of micro-batches, so a replay after a crash never counts twice. Malformed events
go to ``action_counts_quarantine``; events behind the 1-hour watermark to
``action_counts_late`` and ``action_counts_sliding_late``.
"""

from __future__ import annotations

from functools import partial

from streamsmith.runtime.app import App, EventTime, FlowDefinition
from streamsmith.schemas.actions import ACTION_SCHEMA
from streamsmith.transforms.actions import TIME, action_counts, action_events

WINDOW = "1 hour"
SLIDE = "5 minutes"
DELAY = "1 hour"
KEY = ["action", "window_start", "window_end"]

DEFAULT_SPEC = {
    "app": "actions",
    "trigger": "interval=10s",
    "sources": {"actions": {"format": "jsonl", "path": "input/actions"}},
    "flows": {
        "action_counts": {
            "source": "actions",
            "sink": {
                "format": "postgres",
                "table": "action_counts",
                "key": KEY,
                "output_mode": "update",
            },
        },
        "action_counts_sliding": {
            "source": "actions",
            "sink": {
                "format": "postgres",
                "table": "action_counts_sliding",
                "key": KEY,
                "output_mode": "update",
            },
        },
    },
}

APP = App(
    name="actions",
    description="phone open/close actions counted per hour, exactly once into PostgreSQL",
    flows=(
        FlowDefinition(
            name="action_counts",
            prepare=action_events,
            transform=partial(action_counts, window=WINDOW, delay=DELAY),
            description=f"count per action and {WINDOW} window of time",
            record_schema=ACTION_SCHEMA,
            event_time=EventTime(TIME, DELAY, WINDOW),
            stateful=True,
        ),
        FlowDefinition(
            name="action_counts_sliding",
            prepare=action_events,
            transform=partial(action_counts, window=WINDOW, slide=SLIDE, delay=DELAY),
            description=f"count per action and {WINDOW} window sliding every {SLIDE}",
            record_schema=ACTION_SCHEMA,
            quarantine=False,  # the same events are quarantined by action_counts
            event_time=EventTime(TIME, DELAY, WINDOW, SLIDE),
            stateful=True,
        ),
    ),
    default_spec=DEFAULT_SPEC,
    input_hint="e.g. `streamsmith generate actions --to {path}`",
)
