"""streamsmith's Kafka source against a real (embedded) broker: offsets, limits, triggers."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession

from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.kafka.range_cache import seal
from streamsmith.io.kafka.source import SOURCE_NAME, register_kafka_source

Produce = Callable[..., None]


@pytest.fixture(scope="module", autouse=True)
def _registered(spark: SparkSession) -> None:
    register_kafka_source(spark)


def events(n: int, first: int = 0) -> list[bytes]:
    return [json.dumps({"n": i}).encode() for i in range(first, first + n)]


def kafka(
    spark: SparkSession, broker: EmbeddedBroker, *, stream: bool, **options: str
) -> DataFrame:
    reader = spark.readStream if stream else spark.read
    reader = reader.format(SOURCE_NAME).option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def numbers(frame: DataFrame) -> list[int]:
    return sorted(json.loads(row.value)["n"] for row in frame.select("value").collect())


def drain(spark: SparkSession, frame: DataFrame, base: Path) -> tuple[DataFrame, list[int]]:
    """Run ``frame`` with availableNow into Parquet under ``base`` (same checkpoint each call).

    Returns everything in the sink so far and the input rows of each non-empty batch.
    """
    query = (
        frame.writeStream.format("parquet")
        .option("checkpointLocation", str(base / "cp"))
        .trigger(availableNow=True)
        .start(str(base / "out"))
    )
    try:
        query.awaitTermination()
        assert query.exception() is None
        sizes = [int(p.numInputRows) for p in query.recentProgress if p.numInputRows]
    finally:
        query.stop()
    return spark.read.parquet(str(base / "out")), sizes


def test_batch_read_schema_and_offset_ranges(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, produce: Produce
) -> None:
    produce(topic, events(30), keys=[f"k{i}".encode() for i in range(30)])

    everything = kafka(spark, broker, stream=False, subscribe=topic)
    rows = everything.collect()

    assert [f.name for f in everything.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
    ]  # fmt: skip
    assert numbers(everything) == list(range(30))
    assert {(r.partition, r.offset) for r in rows} == {(p, o) for p in range(3) for o in range(10)}
    assert {r.topic for r in rows} == {topic}
    assert all(r.key == f"k{json.loads(r.value)['n']}".encode() for r in rows)
    assert {(r.timestamp is None, r.timestampType) for r in rows} == {(False, 0)}, rows[:2]

    window = kafka(
        spark, broker, stream=False, subscribe=topic,
        startingOffsets=json.dumps({topic: {"0": 2, "1": -2, "2": -1}}),
        endingOffsets=json.dumps({topic: {"0": 5, "1": 3, "2": -1}}),
    )  # fmt: skip
    assert sorted((r.partition, r.offset) for r in window.collect()) == [
        (0, 2), (0, 3), (0, 4), (1, 0), (1, 1), (1, 2),
    ]  # fmt: skip


def test_small_batches_pack_partitions_into_few_tasks(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, produce: Produce
) -> None:
    produce(topic, events(90))  # 30 records in each of the topic's 3 partitions

    def tasks_and_rows(**options: str) -> tuple[int, list[tuple[int, int, int]]]:
        frame = kafka(spark, broker, stream=False, subscribe=topic, **options)
        rows = frame.select("partition", "offset", "value").collect()
        read = [(r.partition, r.offset, json.loads(r.value)["n"]) for r in rows]
        return frame.rdd.getNumPartitions(), read

    whole, every_range = tasks_and_rows()
    packed, packed_rows = tasks_and_rows(minRecordsPerPartition="100")
    pairs, pair_rows = tasks_and_rows(minRecordsPerPartition="50")  # 90 records: 2 tasks
    capped, _ = tasks_and_rows(minRecordsPerPartition="50", maxPackedTasks="1")

    assert (whole, packed, pairs, capped) == (3, 1, 2, 1)
    assert sorted(packed_rows) == sorted(every_range) == sorted(pair_rows)
    assert sorted(n for _, _, n in packed_rows) == list(range(90))
    for partition in range(3):  # one task reads each partition in offset order
        offsets = [offset for p, offset, _ in packed_rows if p == partition]
        assert offsets == list(range(30))


def test_stream_from_earliest_respects_max_offsets_per_trigger(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, produce: Produce, tmp_path: Path
) -> None:
    produce(topic, events(250))
    frame = kafka(
        spark, broker, stream=True, subscribe=topic, startingOffsets="earliest",
        maxOffsetsPerTrigger="40",
    )  # fmt: skip

    out, sizes = drain(spark, frame, tmp_path)

    assert sizes == [40] * 6 + [10]
    assert numbers(out) == list(range(250))

    produce(topic, events(25, first=250))
    out, sizes = drain(spark, frame, tmp_path)  # same checkpoint: only the new records
    assert sizes == [25]
    assert numbers(out) == list(range(275))


def test_adaptive_batches_widen_to_catch_up_then_narrow(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, produce: Produce, tmp_path: Path
) -> None:
    produce(topic, events(1000))
    frame = kafka(
        spark, broker, stream=True, subscribe=topic, startingOffsets="earliest",
        maxOffsetsPerTrigger="400", adaptiveBatches="true", adaptiveFloorOffsets="50",
    )  # fmt: skip

    out, sizes = drain(spark, frame, tmp_path)

    assert sizes == [50, 200, 400, 350]  # growing fourfold while behind, up to the cap
    assert numbers(out) == list(range(1000))
    produce(topic, events(120, first=1000))
    out, sizes = drain(spark, frame, tmp_path)  # a restarted reader starts from the floor
    assert sizes == [50, 70]
    assert numbers(out) == list(range(1120))


def test_queries_sharing_a_range_cache_consume_each_range_once(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, produce: Produce, tmp_path: Path
) -> None:
    produce(topic, events(90))
    cache = tmp_path / "ranges"

    def frame() -> DataFrame:
        return kafka(
            spark, broker, stream=True, subscribe=topic, startingOffsets="earliest",
            maxOffsetsPerTrigger="60", rangeCache="app.flow", rangeCacheReaders="2",
            rangeCacheDir=str(cache),
        )  # fmt: skip

    first, sizes = drain(spark, frame(), tmp_path / "first")
    assert sizes == [60, 30] and numbers(first) == list(range(90))
    kept = sorted(cache.glob("*.arrow"))
    assert len(kept) == 6  # 3 partitions x 2 batches, waiting for their second reader

    # The second query reads the kept ranges, not the broker: a value changed in one
    # kept file shows up in its output (a test-only edit, to prove where rows come from;
    # sealed with the cache's key as the cache seals what it writes, else it is ignored).
    table = pa.ipc.open_file(pa.OSFile(str(kept[0]))).read_all()
    replaced = {json.loads(value)["n"] for value in table.column("value").to_pylist()}
    changed = table.set_column(1, "value", pa.array([b'{"n": -1}'] * table.num_rows, pa.binary()))
    with pa.ipc.new_file(str(kept[0]), changed.schema) as writer:
        writer.write_table(changed)
    seal(kept[0])
    second, sizes = drain(spark, frame(), tmp_path / "second")

    assert sizes == [60, 30]
    assert numbers(second) == [-1] * len(replaced) + sorted(set(range(90)) - replaced)
    assert not list(cache.glob("*.arrow"))  # each range read by both: deleted


def test_stream_from_latest_skips_existing_records(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, produce: Produce, tmp_path: Path
) -> None:
    produce(topic, events(12))
    frame = kafka(spark, broker, stream=True, subscribe=topic)  # startingOffsets=latest

    _, sizes = drain(spark, frame, tmp_path)
    assert sizes == []

    produce(topic, events(9, first=100))
    out, sizes = drain(spark, frame, tmp_path)
    assert sizes == [9]
    assert numbers(out) == list(range(100, 109))


def test_subscribe_pattern_picks_up_new_topics(
    spark: SparkSession, broker: EmbeddedBroker, produce: Produce, tmp_path: Path
) -> None:
    prefix = f"pat{uuid.uuid4().hex[:6]}"
    broker.create_topic(f"{prefix}-a", partitions=2)
    produce(f"{prefix}-a", events(4), partitions=2)
    frame = kafka(
        spark, broker, stream=True, subscribePattern=f"{prefix}-.*", startingOffsets="earliest"
    )
    out, _ = drain(spark, frame, tmp_path)
    assert numbers(out) == [0, 1, 2, 3]

    broker.create_topic(f"{prefix}-b", partitions=1)
    produce(f"{prefix}-b", events(3, first=10), partitions=1)
    produce(f"{prefix}-a", events(2, first=20), partitions=2)
    out, sizes = drain(spark, frame, tmp_path)
    assert sizes == [5]
    assert numbers(out) == [0, 1, 2, 3, 10, 11, 12, 20, 21]  # the new topic from its start


def test_headers_and_assign(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, tmp_path: Path
) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, value=b"v", partition=1, headers=[("trace", b"abc"), ("n", None)])
    producer.produce(topic, value=b"w", partition=2)
    assert producer.flush(30) == 0

    frame = kafka(
        spark, broker, stream=False, assign=json.dumps({topic: [1]}), includeHeaders="true"
    )
    rows = frame.collect()
    assert [(r.value, r.partition) for r in rows] == [(b"v", 1)]
    assert [(h.key, h.value) for h in rows[0].headers] == [("trace", b"abc"), ("n", None)]


VALUE_SCHEMA = (
    "user_id STRING, n INT, big BIGINT, ratio DOUBLE, ok BOOLEAN, event_time TIMESTAMP, "
    "day DATE, tags ARRAY<STRING>, device STRUCT<id: STRING, battery: DOUBLE>"
)


def test_json_at_the_source_equals_from_json_and_flags_bad_values(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, produce: Produce, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F
    from pyspark.testing import assertDataFrameEqual

    valid = [
        json.dumps({
            "user_id": f"u{i}", "n": i, "big": 2**40 + i, "ratio": i / 7, "ok": i % 2 == 0,
            "event_time": f"2026-11-20T10:{i % 60:02d}:0{i % 10}Z", "day": "2026-11-21",
            "tags": ["a", str(i)], "device": {"id": f"d{i}", "battery": 0.5},
            "unknown_field": [1, 2],
        }).encode()
        for i in range(40)
    ]  # fmt: skip
    sparse = [b'{"user_id": "only"}', b'{\n  "n": 5,\n  "user_id": "multi-line"\n}']
    malformed = [
        b'{"user_id": "x", "n": "not a number"}', b"[1, 2]", b"{truncated",
        b'{"user_id": "two"}{"user_id": "objects"}',  # beside the blank value below
        b'{"user_id": "half"} {"user_id"', b': "a value"}',  # two halves of an object
    ]  # fmt: skip
    nulls = [b"", b"null"]  # a null struct, and an object of nulls (as from_json)
    produce(topic, valid + sparse + malformed + nulls)
    options = {"subscribe": topic, "startingOffsets": "earliest"}

    decoded = kafka(
        spark, broker, stream=False, valueFormat="json", valueSchema=VALUE_SCHEMA, **options
    )
    reference = kafka(spark, broker, stream=False, **options).select(
        "partition",
        "offset",
        F.from_json(F.col("value").cast("string"), VALUE_SCHEMA).alias("json"),
    )

    good = decoded.where("json_error IS NULL")
    assertDataFrameEqual(
        good.select("partition", "offset", "json"),
        reference.join(good.select("partition", "offset"), ["partition", "offset"]),
    )
    assert good.count() == len(valid) + len(sparse) + len(nulls)
    bad = sorted((r.value, r.json_error) for r in decoded.where("json_error IS NOT NULL").collect())
    assert [value for value, _ in bad] == sorted(malformed)
    assert all(error.startswith("invalid JSON value: ") for _, error in bad)
    assert decoded.where("json IS NULL AND json_error IS NULL").count() == 1

    stream = kafka(
        spark, broker, stream=True, valueFormat="json", valueSchema=VALUE_SCHEMA, **options
    )
    out, _ = drain(spark, stream, tmp_path)
    assertDataFrameEqual(out, decoded)


@pytest.mark.deep
def test_broker_gone_mid_stream_fails_the_query_clearly(
    spark: SparkSession, produce: Produce, tmp_path: Path
) -> None:
    """A stream whose broker disappears fails with the servers named, not silently."""
    from streamsmith.io.kafka.broker import start_broker

    doomed = start_broker(tmp_path / "doomed")
    try:
        doomed.create_topic("short-lived", partitions=1)
        from confluent_kafka import Producer

        from streamsmith.io.kafka.login import librdkafka_login

        producer = Producer(librdkafka_login({"bootstrap.servers": doomed.bootstrap}))
        for value in events(5):
            producer.produce("short-lived", value=value)
        assert producer.flush(30) == 0
        frame = (
            spark.readStream.format(SOURCE_NAME)
            .option("kafka.bootstrap.servers", doomed.bootstrap)
            .option("subscribe", "short-lived")
            .option("startingOffsets", "earliest")
            .option("pollTimeoutMs", "3000")
            .option("kafka.socket.timeout.ms", "3000")
            .load()
        )
        query = (
            frame.writeStream.format("parquet")
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(processingTime="200 milliseconds")
            .start(str(tmp_path / "out"))
        )
        try:
            query.processAllAvailable()
            assert numbers(spark.read.parquet(str(tmp_path / "out"))) == list(range(5))
            doomed.stop()
            with pytest.raises(Exception, match=rf"{doomed.bootstrap}|short-lived") as failure:
                query.awaitTermination(120)
                raise AssertionError("the query kept running without its broker")
            assert "KafkaSourceError" in str(failure.value)  # ours, naming the servers
        finally:
            query.stop()
    finally:
        doomed.stop()
