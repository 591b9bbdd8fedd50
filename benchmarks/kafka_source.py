"""Kafka source throughput against the embedded broker, beside its limits and baselines.

Loads N ad events (YSB-shaped JSON, about 250 bytes each) into a 4-partition topic of a
fresh embedded broker, then prints events/s, warm (median of --runs passes in one JVM):

- raw confluent-kafka batched consume in this process (the limit);
- the streamsmith source into Spark's ``noop`` sink (bytes only);
- the source + ``from_json`` in Spark (the path Kafka data usually takes);
- the source with JSON decoded at the source (``valueFormat=json``);
- Spark's own JSON file reader on the same events as JSON-lines files.

and, with --cold, the first pass of the JSON-at-source query in a fresh process.

    .venv/bin/python benchmarks/kafka_source.py --events 1000000
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import timed_rounds
from confluent_kafka import Consumer, Producer, TopicPartition

from streamsmith.config import SparkSpec
from streamsmith.generate.ysb import ysb_data
from streamsmith.io.kafka.broker import EmbeddedBroker, start_broker
from streamsmith.io.kafka.client import consumer_config
from streamsmith.io.kafka.login import librdkafka_login
from streamsmith.io.kafka.source import SOURCE_NAME, register_kafka_source
from streamsmith.spark.session import build_session

TOPIC = "ad-events"
PARTITIONS = 4
SCHEMA = (
    "user_id STRING, page_id STRING, ad_id STRING, ad_type STRING, event_type STRING, "
    "event_time TIMESTAMP, ip_address STRING"
)


def ad_events(count: int, seed: int = 1) -> list[bytes]:
    """YSB ad events as JSON, from the ``ysb`` app's generator."""
    return ysb_data(count, seed=seed).lines


def load_topic(broker: EmbeddedBroker, events: list[bytes]) -> None:
    broker.create_topic(TOPIC, partitions=PARTITIONS)
    produce_events(broker, TOPIC, events, PARTITIONS)


def produce_events(
    broker: EmbeddedBroker, topic: str, events: list[bytes], partitions: int, rate: float = 0
) -> None:
    """Write ``events`` round-robin over ``partitions`` (at ``rate`` per second when
    given) and wait for every ack."""
    producer = Producer(
        librdkafka_login(
            {
                "bootstrap.servers": broker.bootstrap,
                "linger.ms": 5 if rate else 20,
                "batch.num.messages": 10000,
                "queue.buffering.max.messages": 500000,
            }
        )
    )
    started = time.perf_counter()
    for index, event in enumerate(events):
        ahead = index / rate - (time.perf_counter() - started) if rate else 0
        if ahead > 0:
            time.sleep(ahead)
        while True:
            try:
                producer.produce(topic, value=event, partition=index % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0


def raw_consume(broker: EmbeddedBroker, total: int) -> None:
    consumer = Consumer(consumer_config({"bootstrap.servers": broker.bootstrap}))
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen = 0
    while seen < total:
        seen += sum(1 for m in consumer.consume(10000, timeout=1.0) if m.error() is None)
    consumer.close()


def decode_alone(events: list[bytes]) -> None:
    """Arrow JSON decoding of the values only, in this process (one core), 10k at a time."""
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import StructType

    from streamsmith.io.kafka.json_values import decode_json_values

    arrow = to_arrow_type(StructType.fromDDL(SCHEMA), timezone="UTC")
    for first in range(0, len(events), 10_000):
        decode_json_values(events[first : first + 10_000], arrow)


def cold_run(bootstrap: str) -> float:
    """One availableNow pass of the JSON-at-source query in a fresh Python + JVM."""
    code = f"""
import time, tempfile
from streamsmith.config import SparkSpec
from streamsmith.spark.session import build_session
from streamsmith.io.kafka.source import SOURCE_NAME, register_kafka_source
started = time.perf_counter()
spark = build_session(SparkSpec(master="local[*]"), "bench-cold")
register_kafka_source(spark)
frame = (spark.readStream.format(SOURCE_NAME).option("kafka.bootstrap.servers", "{bootstrap}")
    .option("subscribe", "{TOPIC}").option("startingOffsets", "earliest")
    .option("valueFormat", "json").option("valueSchema", "{SCHEMA}").load()
    .where("json.event_type = 'view'").select("json.*"))
query = (frame.writeStream.format("noop").trigger(availableNow=True)
    .option("checkpointLocation", tempfile.mkdtemp()).start())
query.awaitTermination()
print(time.perf_counter() - started)
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return float(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument(
        "--runs", type=int, default=4, help="passes per path; the first is discarded"
    )
    parser.add_argument("--cold", action="store_true", help="also time a fresh-process run")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="streamsmith-kafka-bench-") as tmp:
        events = ad_events(args.events)
        files = Path(tmp) / "files"
        files.mkdir()
        for part in range(PARTITIONS):
            (files / f"part-{part}.json").write_bytes(b"\n".join(events[part::PARTITIONS]))
        with start_broker(Path(tmp)) as broker:
            load_topic(broker, events)
            spark = build_session(SparkSpec(master="local[*]"), "bench-kafka")
            register_kafka_source(spark)

            def source(**options: str):  # type: ignore[no-untyped-def]
                reader = (
                    spark.read.format(SOURCE_NAME)
                    .option("kafka.bootstrap.servers", broker.bootstrap)
                    .option("subscribe", TOPIC)
                )
                for key, value in options.items():
                    reader = reader.option(key, value)
                return reader.load()

            from pyspark.sql import functions as F

            def noop(frame):  # type: ignore[no-untyped-def]
                return lambda: frame.write.format("noop").mode("overwrite").save()

            ysb = "event_type = 'view'"
            cases = {
                "raw confluent-kafka consume": lambda: raw_consume(broker, args.events),
                "source -> noop (bytes)": noop(source()),
                "source + from_json (Spark)": noop(
                    source()
                    .select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("j"))
                    .select("j.*")
                    .where(ysb)
                ),
                "source, JSON at the source": noop(
                    source(valueFormat="json", valueSchema=SCHEMA).select("json.*").where(ysb)
                ),
                "JSON decode alone (1 core)": lambda: decode_alone(events),
                "Spark JSON file reader": noop(
                    spark.read.schema(SCHEMA).json(str(files)).where(ysb)
                ),
            }
            results = timed_rounds(args.runs, cases)
            cold = cold_run(broker.bootstrap) if args.cold else None
            spark.stop()

    print(f"{args.events} events, {PARTITIONS} partitions, embedded broker, local[*]")
    print(f"{'path (warm: median, 1st round dropped)':<34}{'seconds':>9}{'events/s':>12}")
    rates = {}
    for name, timings in results.items():
        warm = statistics.median(timings[1:] if len(timings) > 1 else timings)
        rates[name] = args.events / warm
        print(f"{name:<34}{warm:>9.2f}{rates[name]:>12,.0f}")
    if cold is not None:
        print(f"{'JSON at the source, cold process':<34}{cold:>9.2f}{args.events / cold:>12,.0f}")
    print("ratios:")
    json_at_source = rates["source, JSON at the source"]
    for label, numerator, denominator in (
        ("source -> noop / raw consume", "source -> noop (bytes)", "raw confluent-kafka consume"),
        ("JSON at source / from_json", None, "source + from_json (Spark)"),
        ("JSON at source / Spark file reader", None, "Spark JSON file reader"),
    ):
        top = rates[numerator] if numerator else json_at_source
        print(f"  {label:<38}{top / rates[denominator]:.2f}")
    # Both JSON paths pay the source's own cost (consume and Arrow batches, the noop
    # row): what decoding adds on top is where they differ.
    seconds = {name: args.events / rate for name, rate in rates.items()}
    base = seconds["source -> noop (bytes)"]
    added = {name: seconds[name] - base for name in
             ("source + from_json (Spark)", "source, JSON at the source")}  # fmt: skip
    print("decoding, on top of the source -> noop time:")
    for name, extra in added.items():
        print(f"  {name:<38}{extra:>6.2f} s")
    if added["source, JSON at the source"] > 0:
        cheaper = added["source + from_json (Spark)"] / added["source, JSON at the source"]
        print(f"  {'from_json / JSON at the source':<38}{cheaper:>6.2f}")
    best = seconds["source + from_json (Spark)"] / base
    print(
        f"  {'bound on JSON at source / from_json':<38}{best:>6.2f} (a decode that costs nothing)"
    )


if __name__ == "__main__":
    main()
