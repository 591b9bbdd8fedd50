"""The Kafka source's per-message cost: consumed messages into one Arrow batch.

Consumes ``--messages`` YSB events once from an embedded broker, then times
``to_record_batch`` (the step between ``Consumer.consume`` and Spark) on them in batches
of 10,000, with and without JSON decoded at the source; one core, median of ``--runs``.
To compare with an older version of the source, run it with that version first on the
path: ``PYTHONPATH=<checkout>/src .venv/bin/python benchmarks/kafka_batches.py``.

    .venv/bin/python benchmarks/kafka_batches.py --messages 100000
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from pyspark.sql.pandas.types import to_arrow_type

import streamsmith
from streamsmith.generate import produce_all
from streamsmith.generate.ysb import ysb_data
from streamsmith.io.kafka.broker import start_broker
from streamsmith.io.kafka.login import librdkafka_login
from streamsmith.io.kafka.offsets import OffsetRange
from streamsmith.io.kafka.source import parse_options, to_record_batch
from streamsmith.schemas.ysb import AD_EVENT_SCHEMA

BATCH = 10_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"streamsmith from {Path(streamsmith.__file__).parent}")
    with tempfile.TemporaryDirectory() as tmp, start_broker(Path(tmp)) as broker:
        broker.create_topic("batches", partitions=1)
        lines = ysb_data(args.messages, chunks=1).lines
        produce_all(broker.bootstrap, "batches", lines, [None] * len(lines))
        consumer = Consumer(
            librdkafka_login(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "group.id": "bench",
                    "enable.auto.commit": False,
                }
            )
        )
        consumer.assign([TopicPartition("batches", 0, 0)])
        messages: list[Any] = []
        while len(messages) < args.messages:
            messages.extend(m for m in consumer.consume(BATCH, 1.0) if m.error() is None)
        consumer.close()
        raw = parse_options({"kafka.bootstrap.servers": broker.bootstrap,
                             "subscribe": "batches"}, streaming=True)  # fmt: skip
        decoded = dataclasses.replace(
            raw, value_schema="ysb", json_type=to_arrow_type(AD_EVENT_SCHEMA, timezone="UTC")
        )
        whole = OffsetRange("batches", 0, 0, args.messages)
        print(f"{'to_record_batch, ' + str(args.messages) + ' messages':<40}{'seconds':>8}"
              f"{'messages/s':>13}")  # fmt: skip
        for name, options in (("raw values", raw), ("JSON decoded at the source", decoded)):
            times = []
            for _ in range(args.runs):
                started = time.perf_counter()
                for first in range(0, len(messages), BATCH):
                    to_record_batch(messages[first : first + BATCH], whole, options)
                times.append(time.perf_counter() - started)
            took = statistics.median(times)
            print(f"{name:<40}{took:>8.3f}{len(messages) / took:>13,.0f}")


if __name__ == "__main__":
    main()
