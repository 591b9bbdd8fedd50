"""Adaptive batch sizing: catch-up time for a fixed backlog, then latency once caught up.

For each admission policy of the Kafka source — a small fixed ``maxOffsetsPerTrigger``,
a large one, no limit, and ``adaptiveBatches`` between the two — it loads the same
backlog of ad events (YSB-shaped JSON) into a fresh topic of the embedded broker, starts
a query from the earliest offset with back-to-back micro-batches, and measures

- catch-up: seconds until the whole backlog is processed, the number of batches and the
  largest batch;
- latency once caught up: events produced at a fixed rate for a while; for each, the time
  from its Kafka timestamp to the end of the micro-batch that processed it (p50, p99).

The query parses the JSON with ``from_json`` and counts events per type and 10-second
window, the shape of the YSB query.

    .venv/bin/python benchmarks/adaptive_batches.py --backlog 300000 --rate 2000
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_source import SCHEMA, ad_events, produce_events
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamsmith.config import SparkSpec
from streamsmith.io.kafka.broker import EmbeddedBroker, start_broker
from streamsmith.io.kafka.source import SOURCE_NAME, register_kafka_source
from streamsmith.spark.session import build_session

PARTITIONS = 2


@dataclass
class Run:
    """What one policy did."""

    backlog: int
    started: float = 0.0
    caught_up: float | None = None
    batches_to_catch_up: int = 0
    largest_batch: int = 0
    rows: int = 0
    steady_from_us: int | None = None
    latencies_ms: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_batch(self, batch: DataFrame, _batch_id: int) -> None:
        stamps = F.unix_micros(F.col("timestamp"))
        counted = batch.groupBy("json.event_type", F.window("timestamp", "10 seconds")).count()
        counted.write.format("noop").mode("overwrite").save()
        steady_from = self.steady_from_us
        recent = []
        size = batch.count()
        if steady_from is not None:
            recent = [r[0] for r in batch.where(stamps >= steady_from).select(stamps).collect()]
        done = time.time() * 1_000_000
        with self.lock:
            self.rows += size
            if self.caught_up is None:
                self.largest_batch = max(self.largest_batch, size)
                self.batches_to_catch_up += 1 if size else 0
                if self.rows >= self.backlog:
                    self.caught_up = time.perf_counter()
            self.latencies_ms += [(done - stamp) / 1000 for stamp in recent]


def measure(
    spark: SparkSession,
    broker: EmbeddedBroker,
    name: str,
    options: dict[str, str],
    args: argparse.Namespace,
    backlog: list[bytes],
    steady: list[bytes],
) -> Run:
    topic = f"adaptive-{name}"
    broker.create_topic(topic, partitions=PARTITIONS)
    produce_events(broker, topic, backlog, PARTITIONS)
    run = Run(len(backlog))
    reader = (
        spark.readStream.format(SOURCE_NAME)
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    frame = reader.load().select(
        "timestamp", F.from_json(F.col("value").cast("string"), SCHEMA).alias("json")
    )
    with tempfile.TemporaryDirectory() as checkpoint:
        run.started = time.perf_counter()
        query = (
            frame.writeStream.foreachBatch(run.on_batch)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="0 seconds")
            .start()
        )
        try:
            while run.caught_up is None:
                if query.exception() is not None:
                    raise RuntimeError(str(query.exception()))
                time.sleep(0.05)
            run.steady_from_us = int(time.time() * 1000) * 1000  # Kafka stamps whole ms
            produce_events(broker, topic, steady, PARTITIONS, rate=args.rate)
            deadline = time.perf_counter() + 60
            while run.rows < len(backlog) + len(steady) and time.perf_counter() < deadline:
                time.sleep(0.05)
        finally:
            query.stop()
    return run


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=300_000)
    parser.add_argument("--rate", type=float, default=2000, help="events/s once caught up")
    parser.add_argument("--steady-seconds", type=float, default=20)
    parser.add_argument("--floor", type=int, default=5_000)
    parser.add_argument("--cap", type=int, default=200_000)
    args = parser.parse_args()
    policies: dict[str, dict[str, str]] = {
        "fixed-small": {"maxOffsetsPerTrigger": str(args.floor)},
        "fixed-large": {"maxOffsetsPerTrigger": str(args.cap)},
        "unbounded": {},
        "adaptive": {
            "maxOffsetsPerTrigger": str(args.cap),
            "adaptiveBatches": "true",
            "adaptiveFloorOffsets": str(args.floor),
        },
    }
    events = ad_events(args.backlog + int(args.rate * args.steady_seconds))
    backlog, steady = events[: args.backlog], events[args.backlog :]
    results: dict[str, Any] = {}
    with (
        tempfile.TemporaryDirectory(prefix="streamsmith-adaptive-") as tmp,
        start_broker(Path(tmp)) as broker,
    ):
        spark = build_session(SparkSpec(master="local[*]"), "bench-adaptive")
        register_kafka_source(spark)
        measure(spark, broker, "warmup", {}, args, backlog[:20_000], steady[:200])
        for name, options in policies.items():
            results[name] = measure(spark, broker, name, options, args, backlog, steady)
        spark.stop()

    print(f"backlog {args.backlog} events, then {args.rate:g}/s for {args.steady_seconds:g} s; "
          f"{PARTITIONS} partitions, local[*], floor {args.floor}, cap {args.cap}")  # fmt: skip
    print(f"{'policy':<14}{'catch-up s':>11}{'batches':>9}{'largest':>9}"
          f"{'p50 ms':>9}{'p99 ms':>9}{'events':>8}")  # fmt: skip
    for name, run in results.items():
        assert run.caught_up is not None
        print(
            f"{name:<14}{run.caught_up - run.started:>11.1f}{run.batches_to_catch_up:>9}"
            f"{run.largest_batch:>9}{percentile(run.latencies_ms, 0.5):>9.0f}"
            f"{percentile(run.latencies_ms, 0.99):>9.0f}{len(run.latencies_ms):>8}"
        )
    small, adaptive = results["fixed-small"], results["adaptive"]
    assert small.caught_up is not None and adaptive.caught_up is not None
    speedup = (small.caught_up - small.started) / (adaptive.caught_up - adaptive.started)
    p99 = percentile(adaptive.latencies_ms, 0.99) / percentile(small.latencies_ms, 0.99)
    print(f"catch-up fixed-small / adaptive: {speedup:.1f}x; p99 adaptive / fixed-small: {p99:.2f}")


if __name__ == "__main__":
    main()
