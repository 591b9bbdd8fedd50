"""What a real Apache Kafka broker offers, read through ``format: kafka`` on Spark's own
connector: transactions (aborted records never reach a table), starting offsets by
timestamp, compacted topics, and murmur2 partitioning shared by every writer."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql import DataFrame, SparkSession

from streamsmith.config import SourceSpec
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.kafka.sink import producer_config
from streamsmith.io.sources.kafka import kafka_format, read_kafka


def source(broker: EmbeddedBroker, topic: str, **options: str) -> SourceSpec:
    return SourceSpec(
        format="kafka",
        options={"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic, **options},
    )


def values(frame: DataFrame) -> list[str]:
    return sorted(row.value.decode() for row in frame.select("value").collect())


def drained(spark: SparkSession, spec: SourceSpec, base: Path) -> list[str]:
    """The records a catch-up (availableNow) of ``spec`` writes to a Parquet table."""
    query = (
        read_kafka(spark, spec, streaming=True)
        .select("value")
        .writeStream.format("parquet")
        .option("checkpointLocation", str(base / "cp"))
        .trigger(availableNow=True)
        .start(str(base / "out"))
    )
    try:
        query.awaitTermination()
        assert query.exception() is None
    finally:
        query.stop()
    return values(spark.read.parquet(str(base / "out")))


def test_format_kafka_runs_on_sparks_connector(spark: SparkSession, broker: EmbeddedBroker) -> None:
    assert kafka_format(spark, source(broker, "any")) == "kafka"


def test_aborted_transactions_never_reach_a_table(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, tmp_path: Path
) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic})
    producer.init_transactions(30)
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, value=f"{outcome}-{i}".encode(), partition=i % 3)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    spec = source(broker, topic, startingOffsets="earliest")

    landed = drained(spark, spec, tmp_path)
    batch = values(read_kafka(spark, spec, streaming=False))

    assert landed == batch == sorted([f"commit-{i}" for i in range(5)] * 2)


def test_starting_offsets_by_timestamp(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, tmp_path: Path
) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    base_ms = 1_700_000_000_000
    for i in range(30):  # one record a second of event time, over three partitions
        producer.produce(
            topic, value=f"r{i}".encode(), partition=i % 3, timestamp=base_ms + i * 1000
        )
    assert producer.flush(30) == 0
    spec = source(broker, topic, startingTimestamp=str(base_ms + 20_000))

    assert drained(spark, spec, tmp_path) == sorted(f"r{i}" for i in range(20, 30))


def test_a_compacted_topic_reads_as_the_latest_value_per_key(
    spark: SparkSession, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    topic = "compacted-latest"
    broker.create_topic(
        topic,
        partitions=1,
        config={
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "100",
        },
    )
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for version in range(5):
        for key in ("a", "b", "c"):
            producer.produce(topic, key=key, value=json.dumps({key: version}).encode())
        producer.flush(30)
        time.sleep(0.2)  # a new segment per round: only closed segments are compacted
    # Compaction runs in the broker's cleaner thread: wait (bounded) until the first
    # offset still held is past the superseded versions.
    deadline = time.monotonic() + 90
    while _first_offset(broker, topic) == 0 and time.monotonic() < deadline:
        producer.produce(topic, key="tick", value=b"{}")  # rolls the active segment
        producer.flush(30)
        time.sleep(0.5)
    assert _first_offset(broker, topic) > 0, "the cleaner did not compact within 90 s"

    spec = source(broker, topic, startingOffsets="earliest", failOnDataLoss="false")
    rows = read_kafka(spark, spec, streaming=False).collect()
    latest = {row.key.decode(): row.value.decode() for row in sorted(rows, key=lambda r: r.offset)}
    assert {k: latest[k] for k in "abc"} == {k: json.dumps({k: 4}) for k in "abc"}
    assert len(rows) < 16, "superseded versions are gone from the topic"
    # The cleaner may compact further while the stream reads: it gets at most those rows,
    # the latest value of every key among them, and nothing that was never written.
    streamed = drained(spark, spec, tmp_path)
    written = {json.dumps({k: v}) for k in "abc" for v in range(5)} | {"{}"}
    assert len(streamed) <= len(rows) and set(streamed) <= written
    assert {json.dumps({k: 4}) for k in "abc"} <= set(streamed)


def _first_offset(broker: EmbeddedBroker, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "probe"})
    try:
        offset = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0]
        records = _read_all(consumer, topic)
    finally:
        consumer.close()
    # The low watermark stays 0 under compaction; the first surviving offset moves.
    return records[0] if records and offset == 0 else offset


def _read_all(consumer: Consumer, topic: str) -> list[int]:
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    consumer.assign([TopicPartition(topic, 0, low)])
    offsets: list[int] = []
    deadline = time.monotonic() + 10
    while (not offsets or offsets[-1] < high - 1) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            offsets.append(message.offset())
    return offsets


def test_keyed_records_land_where_java_producers_put_them(
    spark: SparkSession, broker: EmbeddedBroker, topic: str
) -> None:
    """streamsmith's Python producer and Spark's Kafka sink choose the same partition for
    a key (murmur2): one key never spreads over partitions by who wrote it."""
    keys = [f"user-{i}" for i in range(40)]
    python = Producer(producer_config({"bootstrap.servers": broker.bootstrap}))
    for key in keys:
        python.produce(topic, key=key.encode(), value=b"python")
    assert python.flush(30) == 0
    rows = [(key, "spark") for key in keys]
    (
        spark.createDataFrame(rows, "key string, value string")
        .write.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic)
        .save()
    )

    read = read_kafka(spark, source(broker, topic, startingOffsets="earliest"), streaming=False)
    where: dict[str, set[int]] = {}
    for row in read.select("key", "partition").collect():
        where.setdefault(row.key.decode(), set()).add(row.partition)
    assert sorted(where) == sorted(keys)
    assert all(len(partitions) == 1 for partitions in where.values()), where
    assert len({min(p) for p in where.values()}) == 3  # and keys do spread over partitions


def test_the_broker_admits_only_logged_in_clients_and_streamsmiths_own(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A broker streamsmith starts takes SASL/PLAIN only, on its listener and its
    controller's (no plain listener beside them): a client that does not log in is
    refused, a wrong password too; streamsmith's own clients (the admin client, the
    producer, both connectors) log in with the broker's secret, and ``kafka.*`` security
    settings a user gives reach Spark's connector as they are."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    from streamsmith.io.kafka.broker import start_broker
    from streamsmith.io.kafka.login import broker_secret

    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
    with start_broker(tmp_path / "sasl", sasl_users={"alice": "wonder-land"}) as secured:
        settings = (tmp_path / "sasl/server.properties").read_text()
        assert f"listeners=SASL_PLAINTEXT://{secured.bootstrap},CONTROLLER:" in settings
        assert "listener.security.protocol.map=CONTROLLER:SASL_PLAINTEXT,SASL_PLAINTEXT:" in (
            settings
        )
        assert "PLAINTEXT://" not in settings.replace("SASL_PLAINTEXT://", "")
        assert secured.sasl_bootstrap == secured.bootstrap
        assert broker_secret(secured.bootstrap) is not None

        errors: list[KafkaError] = []
        anonymous = AdminClient({"bootstrap.servers": secured.bootstrap, "error_cb": errors.append})
        with pytest.raises(KafkaException):
            anonymous.list_topics(timeout=10)
        anonymous.poll(1)  # serves the error callbacks
        assert errors, "a client that does not log in must be refused"

        secured.create_topic("private", partitions=1)
        producer = Producer(producer_config({"bootstrap.servers": secured.bootstrap}))
        for i in range(4):
            producer.produce("private", value=f"s{i}".encode())
        assert producer.flush(30) == 0
        own = {"kafka.bootstrap.servers": secured.bootstrap, "subscribe": "private",
               "startingOffsets": "earliest"}  # fmt: skip
        for connector in ("jvm", "python"):
            spec = SourceSpec(format="kafka", connector=connector, options=own)
            assert values(read_kafka(spark, spec, streaming=False)) == ["s0", "s1", "s2", "s3"]
        spec = SourceSpec(
            format="kafka",
            options={
                **own,
                "kafka.security.protocol": "SASL_PLAINTEXT",
                "kafka.sasl.mechanism": "PLAIN",
                "kafka.sasl.jaas.config": jaas + 'password="wonder-land";',
            },
        )
        assert values(read_kafka(spark, spec, streaming=False)) == ["s0", "s1", "s2", "s3"]

        errors.clear()
        wrong = AdminClient({
            "bootstrap.servers": secured.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "guess",
            "error_cb": errors.append,
        })  # fmt: skip
        with pytest.raises(KafkaException):
            wrong.list_topics(timeout=10)
        wrong.poll(1)  # serves the error callbacks
        assert any(error.code() == KafkaError._AUTHENTICATION for error in errors), errors
