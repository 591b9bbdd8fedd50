"""streamsmith's Kafka sink: every row delivered, and loud failures when it cannot be."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streamsmith.io.kafka.broker import EmbeddedBroker, start_broker
from streamsmith.io.kafka.source import SOURCE_NAME, register_kafka_source

Produce = Callable[..., None]


@pytest.fixture(scope="module", autouse=True)
def _registered(spark: SparkSession) -> None:
    register_kafka_source(spark)


def read_topic(spark: SparkSession, broker: EmbeddedBroker, topic: str) -> list[tuple]:
    frame = (
        spark.read.format(SOURCE_NAME)
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
    )
    return sorted(
        (r.key, r.value, r.partition, [(h.key, h.value) for h in r.headers])
        for r in frame.collect()
    )


def test_batch_write_with_keys_partitions_and_headers(
    spark: SparkSession, broker: EmbeddedBroker, topic: str
) -> None:
    rows = [(f"k{i}", json.dumps({"n": i}), i % 3) for i in range(50)]
    frame = spark.createDataFrame(rows, "key string, value string, partition int").withColumn(
        "headers", F.array(F.struct(F.lit("source").alias("key"), F.lit(b"test").alias("value")))
    )
    frame.write.format(SOURCE_NAME).option("kafka.bootstrap.servers", broker.bootstrap).option(
        "topic", topic
    ).mode("append").save()

    assert read_topic(spark, broker, topic) == sorted(
        (k.encode(), v.encode(), p, [("source", b"test")]) for k, v, p in rows
    )


def test_stream_topic_to_topic_delivers_every_record(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, produce: Produce, tmp_path: Path
) -> None:
    produce(topic, [json.dumps({"n": i}).encode() for i in range(120)])
    target = f"{topic}-out"
    broker.create_topic(target, partitions=2)
    doubled = (
        spark.readStream.format(SOURCE_NAME)
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "50")
        .load()
        .select(
            F.col("offset").cast("string").alias("key"),
            F.to_json(F.struct((F.get_json_object(F.col("value").cast("string"), "$.n") * 2)
                               .cast("int").alias("n2"))).alias("value"),
        )
    )  # fmt: skip
    query = (
        doubled.writeStream.format(SOURCE_NAME)
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
        assert query.exception() is None
    finally:
        query.stop()

    values = sorted(json.loads(v)["n2"] for _, v, _, _ in read_topic(spark, broker, target))
    assert values == [2 * i for i in range(120)]


def test_sink_fails_loudly_when_the_broker_is_gone(spark: SparkSession, tmp_path: Path) -> None:
    with start_broker(tmp_path) as doomed:
        servers = doomed.bootstrap
    frame = spark.createDataFrame([("v1",), ("v2",)], "value string")
    with pytest.raises(PySparkException, match=r"not delivered|unacknowledged"):
        frame.write.format(SOURCE_NAME).option("kafka.bootstrap.servers", servers).option(
            "topic", "nowhere"
        ).option("kafka.message.timeout.ms", "3000").mode("append").save()


def test_sink_rejects_frames_it_cannot_write(spark: SparkSession, broker: EmbeddedBroker) -> None:
    writer = (
        spark.createDataFrame([("a", 1)], "value string, extra int")
        .write.format(SOURCE_NAME)
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", "x")
        .mode("append")
    )
    with pytest.raises(PySparkException, match=r"does not know columns \['extra'\]"):
        writer.save()
