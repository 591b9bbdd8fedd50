"""The Yahoo Streaming Benchmark as a reference app: views per campaign in 10-second windows.

Ad events (JSON lines, from files or Kafka) are parsed with quarantine, the views mapped
to their campaign through the static table ``ysb_campaigns`` (``ad_id, campaign_id``;
written by ``streamsmith generate ysb``) and counted per campaign in 10-second tumbling
windows of ``event_time`` with a 10-second watermark. ``campaign_windows`` appends each
window to the lake once the watermark has closed it; ``campaign_windows_pg`` (off by
default) keeps every window up to date in PostgreSQL (update mode).

From Kafka, decode the JSON at the source (streamsmith's connector):
``--set sources.ads.format=kafka --set sources.ads.options.subscribe=ysb
--set sources.ads.options.valueFormat=json``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from streamsmith.runtime.app import App, EventTime, FlowDefinition
from streamsmith.schemas.ysb import AD_EVENT_SCHEMA
from streamsmith.transforms.ysb import TIME, ad_events, campaign_views

WINDOW = "10 seconds"
DELAY = "10 seconds"
CAMPAIGNS = "ysb_campaigns"
KEY = ["campaign_id", "window_start", "window_end"]

DEFAULT_SPEC = {
    "app": "ysb",
    "trigger": "interval=1s",
    "sources": {"ads": {"format": "jsonl", "path": "input/ysb"}},
    "flows": {
        "campaign_windows": {
            "source": "ads",
            "sink": {"table": "campaign_windows", "output_mode": "append"},
        },
        "campaign_windows_pg": {
            "source": "ads",
            "enabled": False,
            "sink": {
                "format": "postgres",
                "table": "campaign_windows",
                "key": KEY,
                "output_mode": "update",
            },
        },
    },
}


def kafka_overrides(bootstrap: str, topic: str) -> dict[str, Any]:
    """Spec overrides (``load_spec(..., overrides=...)``) that read the ads from ``topic``
    (from its start) instead of files, the JSON decoded at the source."""
    options = {"subscribe": topic, "startingOffsets": "earliest", "valueFormat": "json"}
    return {
        "kafka": {"bootstrap_servers": bootstrap},
        "sources": {"ads": {"format": "kafka", "path": None, "options": options}},
    }


def _views_flow(name: str, description: str, *, first: bool) -> FlowDefinition:
    """One of the two flows over the same windows; the first quarantines and records late
    events for both, since they read the same events under the same rule."""
    return FlowDefinition(
        name=name,
        prepare=ad_events,
        transform=partial(campaign_views, window=WINDOW, delay=DELAY),
        description=description,
        record_schema=AD_EVENT_SCHEMA,
        quarantine=first,
        lookups=(CAMPAIGNS,),
        event_time=EventTime(TIME, DELAY, WINDOW),
        stateful=True,
        record_late=first,
    )


APP = App(
    name="ysb",
    description="Yahoo Streaming Benchmark: views per campaign in 10-second windows",
    flows=(
        _views_flow(
            "campaign_windows",
            f"views per campaign, {WINDOW} windows, appended once closed",
            first=True,
        ),
        _views_flow(
            "campaign_windows_pg",
            f"views per campaign, {WINDOW} windows, upserted into PostgreSQL",
            first=False,
        ),
    ),
    default_spec=DEFAULT_SPEC,
    input_hint="e.g. `streamsmith generate ysb --to {path}`",
)
