"""The Yahoo Streaming Benchmark as a reference app: views per campaign in 10-second windows.

Ad events (JSON lines, from files or Kafka) are parsed with quarantine, the views mapped
to their campaign through the static table ``ysb_campaigns`` (``ad_id, campaign_id``;
written by ``streamsmith generate ysb``) and counted per campaign in 10-second tumbling
windows of ``event_time`` with a 10-second watermark. ``campaign_windows`` appends each
window to the lake once the watermark has closed it; ``campaign_windows_pg`` (off by
default) keeps every window up to date in PostgreSQL (update mode).

From Kafka: ``--set sources.ads.format=kafka --set sources.ads.options.subscribe=ysb``
(Spark's Kafka connector; the flow decodes the values), or with
``--set sources.ads.options.valueFormat=json`` the JSON decoded at the source by
streamsmith's Python connector.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from streamsmith.api import EventTime, Pipeline
from streamsmith.schemas.ysb import AD_EVENT_SCHEMA
from streamsmith.transforms.ysb import TIME, ad_events, campaign_views

WINDOW = "10 seconds"
LATENESS = "10 seconds"
CAMPAIGNS = "ysb_campaigns"
KEY = ["campaign_id", "window_start", "window_end"]
RULE = EventTime(TIME, LATENESS, WINDOW)

pipeline = Pipeline(
    "ysb",
    description="Yahoo Streaming Benchmark: views per campaign in 10-second windows",
    sources={"ads": {"format": "jsonl", "path": "input/ysb"}},
    trigger="interval=1s",
    input_hint="e.g. `streamsmith generate ysb --to {path}`",
)


def views(events: DataFrame, ysb_campaigns: DataFrame, event_time: EventTime) -> DataFrame:
    """Views per campaign and window (the transform windows after its filter and
    projection, so it applies the event time itself)."""
    assert event_time.window is not None  # RULE declares one; the spec may only change it
    return campaign_views(
        events, ysb_campaigns, window=event_time.window, delay=event_time.lateness
    )


# Two flows over the same windows; the first quarantines and records late events for
# both, since they read the same events under the same rule.
pipeline.flow(
    views,
    name="campaign_windows",
    source="ads",
    sink={"table": "campaign_windows", "output_mode": "append"},
    parse=ad_events,
    schema=AD_EVENT_SCHEMA,
    lookups=(CAMPAIGNS,),
    event_time=RULE,
    description=f"views per campaign, {WINDOW} windows, appended once closed",
)
pipeline.flow(
    views,
    name="campaign_windows_pg",
    source="ads",
    sink={"format": "postgres", "table": "campaign_windows", "key": KEY, "output_mode": "update"},
    parse=ad_events,
    schema=AD_EVENT_SCHEMA,
    lookups=(CAMPAIGNS,),
    event_time=RULE,
    quarantine=False,
    record_late=False,
    enabled=False,
    description=f"views per campaign, {WINDOW} windows, upserted into PostgreSQL",
)

APP = pipeline.app


def kafka_overrides(bootstrap: str, topic: str, *, json_at_source: bool = True) -> dict[str, Any]:
    """Spec overrides (``load_spec(..., overrides=...)``) that read the ads from ``topic``
    (from its start) instead of files: the JSON decoded at the source (streamsmith's
    Python connector), or with ``json_at_source=False`` by the flow (Spark's connector)."""
    options: dict[str, Any] = {"subscribe": topic, "startingOffsets": "earliest"}
    if json_at_source:
        options["valueFormat"] = "json"
    return {
        "kafka": {"bootstrap_servers": bootstrap},
        "sources": {"ads": {"format": "kafka", "path": None, "options": options}},
    }
