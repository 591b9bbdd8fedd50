"""The Yahoo Streaming Benchmark query, pure: ad events in, views per campaign and window out.

YSB keeps the views (``event_type = 'view'``), maps each ad to its campaign through a
static table, and counts views per campaign in 10-second tumbling windows of the event
time. Events of an unknown type or without an ad or a time are quarantined; views of an
ad the table does not know count for no campaign (YSB's inner join drops them).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamsmith.schemas.ysb import AD_EVENT_SCHEMA, EVENT_TYPES
from streamsmith.transforms.events import flatten_window, parse_events

TIME = "event_time"


def ad_events(source: DataFrame) -> DataFrame:
    """Typed ad events, tagged for quarantine."""
    known = F.col("event_type").isin(*EVENT_TYPES)
    return parse_events(
        source,
        AD_EVENT_SCHEMA,
        required=(TIME, "ad_id", "event_type"),
        rules=[(~known, f"event_type is none of {', '.join(EVENT_TYPES)}")],
    )


def campaign_views(
    events: DataFrame,
    ysb_campaigns: DataFrame,
    *,
    window: str = "10 seconds",
    delay: str = "10 seconds",
) -> DataFrame:
    """Views per campaign and tumbling window: ``campaign_id, window_start, window_end,
    views``. The filter and projection run before the join, so Spark joins and shuffles
    only two short columns per view; the campaigns table (``ad_id, campaign_id``) is
    small and broadcast."""
    views = (
        events.withWatermark(TIME, delay)
        .filter(F.col("event_type") == "view")
        .select("ad_id", TIME)
        .join(F.broadcast(ysb_campaigns.select("ad_id", "campaign_id")), "ad_id")
    )
    counted = views.groupBy(F.window(TIME, window), "campaign_id").agg(
        F.count(F.lit(1)).alias("views")
    )
    return flatten_window(counted).select("campaign_id", "window_start", "window_end", "views")
