"""Phone actions (the seeds' first example): open/close events counted per hour.

"There will never be close events counted faster than open events": with prefix
integrity, at any time the counts equal a batch count over a prefix of the input, and in
the input a phone's close always follows its open.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamsmith.schemas.actions import ACTION_SCHEMA
from streamsmith.transforms.events import flatten_window, parse_events

ACTIONS = ("open", "close")
TIME = "time"


def action_events(source: DataFrame) -> DataFrame:
    """Typed ``(phone_id, time, action)`` events, tagged for quarantine."""
    return parse_events(
        source,
        ACTION_SCHEMA,
        required=("phone_id", TIME, "action"),
        rules=((~F.col("action").isin(*ACTIONS), "action is neither open nor close"),),
    )


def counts_per_window(events: DataFrame) -> DataFrame:
    """Events per action and ``window`` (the flow's declared window, which the runtime
    adds with the watermark): ``window_start, window_end, action, count``."""
    return flatten_window(events.groupBy("window", "action").count())
