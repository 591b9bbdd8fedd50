"""YSB in Bytewax: Kafka source (stops at the end), event-clock tumbling windows."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import bytewax.operators as op
from _ysb import CONSUMER_TUNING, Run, event_ms
from bytewax.connectors.kafka import KafkaSource
from bytewax.dataflow import Dataflow
from bytewax.operators.windowing import EventClock, TumblingWindower, count_window
from bytewax.testing import run_main

run = Run.from_argv()
flow = Dataflow("ysb")
source = KafkaSource([run.bootstrap], [run.topic], tail=False, add_config=CONSUMER_TUNING)
messages = op.input("kafka", flow, source)


def decode(message):  # type: ignore[no-untyped-def]
    run.saw()
    return json.loads(message.value)


events = op.map("decode", messages, decode)
views = op.filter(
    "views", events, lambda e: e["event_type"] == "view" and e["ad_id"] in run.campaigns
)
clock = EventClock(
    lambda e: datetime.fromtimestamp(event_ms(e["event_time"]) / 1000, UTC),
    wait_for_system_duration=timedelta(seconds=0),
)
windower = TumblingWindower(length=timedelta(seconds=10), align_to=datetime(2026, 1, 1, tzinfo=UTC))
counted = count_window("count", views, clock, windower, key=lambda e: run.campaigns[e["ad_id"]])
op.inspect("windows", counted.down, lambda _step, item: run.windows.add((item[0], item[1][0])))
run_main(flow)
run.report("Bytewax")
