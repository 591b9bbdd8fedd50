"""YSB in Quix Streams: JSON values, event-time tumbling windows, counted per campaign."""

from __future__ import annotations

import tempfile
from datetime import timedelta

from _ysb import CONSUMER_TUNING, Run, event_ms
from quixstreams import Application

run = Run.from_argv()
app = Application(
    broker_address=run.bootstrap,
    consumer_group="ysb-quix",
    auto_offset_reset="earliest",
    state_dir=tempfile.mkdtemp(),
    use_changelog_topics=False,
    consumer_extra_config=CONSUMER_TUNING,
)
topic = app.topic(
    run.topic,
    value_deserializer="json",
    timestamp_extractor=lambda value, _headers, _ts, _type: event_ms(value["event_time"]),
)
# Tansu describes topics without retention.ms, which Quix copies to its state's
# changelog config; Kafka always has it, so a default changes nothing there.
topic.broker_config.extra_config.setdefault("retention.ms", str(7 * 24 * 3600 * 1000))
sdf = app.dataframe(topic)
sdf = sdf.update(lambda _value: run.saw())
sdf = sdf.filter(lambda value: value["event_type"] == "view")
sdf = sdf.filter(lambda value: value["ad_id"] in run.campaigns)
# Windows are kept per message key and the input is not keyed: re-key by campaign, which
# Quix does through a repartition topic (its way of grouping by another key).
sdf = sdf.group_by(lambda value: run.campaigns[value["ad_id"]], name="campaign")
sdf = sdf.update(lambda _value: run.touch())  # the timing ends with the re-keyed copies
sdf = sdf.tumbling_window(timedelta(seconds=10)).count().final()
sdf = sdf.update(lambda window, key, *_: run.windows.add((key, window["start"])), metadata=True)
app.run(sdf, timeout=5.0)  # stops 5 s after the last message
run.report("Quix Streams")
