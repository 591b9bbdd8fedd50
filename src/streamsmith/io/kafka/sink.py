"""streamsmith's Kafka sink: Arrow batches from Spark tasks to an idempotent producer.

Input columns follow Spark's Kafka sink: ``value`` (binary or string, required), and
optionally ``key``, ``topic``, ``partition`` and ``headers``; the ``topic`` option, when
set, overrides a ``topic`` column.

Delivery guarantee: **at least once**. Each task flushes its producer before it reports
success and any delivery error fails the task, so a batch commits only once every
record is acknowledged (``acks=all``, idempotent producer: no duplicates from retries
within a task). A batch that is replayed after a failure is sent again; give records a
key so that consumers, or a compacted topic, can keep the latest value per key. Spark
Structured Streaming with a non-transactional sink cannot promise more.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaException, Producer
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from streamsmith.io.kafka.login import librdkafka_login
from streamsmith.io.kafka.options import SINK_OPTIONS, unknown_options

_KNOWN_COLUMNS = {"key", "value", "topic", "partition", "headers"}


class KafkaSinkError(RuntimeError):
    """A record could not be delivered; the task (and so the batch) fails."""


@dataclass(frozen=True)
class SinkOptions:
    """Validated options of the Kafka sink."""

    kafka_conf: Mapping[str, str]
    topic: str | None
    flush_timeout_s: float

    @property
    def servers(self) -> str:
        return self.kafka_conf["bootstrap.servers"]


def parse_sink_options(options: Mapping[str, str], schema: StructType) -> SinkOptions:
    """Check options against the DataFrame's columns before any task starts."""
    opts = {key.lower(): str(value) for key, value in options.items()}
    misspelt = unknown_options(opts, SINK_OPTIONS)
    if misspelt:
        raise ValueError(
            f"unknown Kafka sink option(s) {', '.join(misspelt)}: see the option reference "
            "(librdkafka settings go under kafka.*)"
        )
    kafka_conf = {k[len("kafka.") :]: v for k, v in opts.items() if k.startswith("kafka.")}
    if "bootstrap.servers" not in kafka_conf:
        raise ValueError("option kafka.bootstrap.servers is required, e.g. 127.0.0.1:9092")
    columns = set(schema.fieldNames())
    if "value" not in columns:
        raise ValueError(f"the Kafka sink needs a 'value' column; the frame has {sorted(columns)}")
    unknown = columns - _KNOWN_COLUMNS
    if unknown:
        raise ValueError(
            f"the Kafka sink does not know columns {sorted(unknown)}: select key, value and "
            "optionally topic, partition, headers (e.g. to_json(struct(...)) AS value)"
        )
    topic = opts.get("topic")
    if topic is None and "topic" not in columns:
        raise ValueError("set the topic option or add a 'topic' column")
    return SinkOptions(
        kafka_conf=kafka_conf,
        topic=topic,
        flush_timeout_s=float(opts.get("flushtimeoutms", "120000")) / 1000,
    )


def producer_config(kafka_conf: Mapping[str, str]) -> dict[str, Any]:
    """An idempotent, fully acknowledged producer; user ``kafka.*`` settings win.

    Keyed records go where Java producers and Spark's Kafka sink put them (murmur2 of the
    key; librdkafka's own default hashes with CRC32), so one key stays on one partition
    whichever connector or client wrote it."""
    conf: dict[str, Any] = {
        "partitioner": "murmur2_random",
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "compression.type": "lz4",
        "delivery.timeout.ms": 120000,
    }
    conf.update(kafka_conf)
    return librdkafka_login(conf)


@dataclass
class SentRecords(WriterCommitMessage):
    """What one task delivered."""

    records: int


def deliver(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> SentRecords:
    """Produce every row of ``batches`` and wait for all acknowledgements, or raise."""
    producer = Producer(producer_config(options.kafka_conf))
    failures: list[str] = []

    def on_delivery(error: Any, message: Any) -> None:
        if error is not None:
            failures.append(f"{message.topic()}[{message.partition()}]: {error.str()}")

    sent = 0
    for batch in batches:
        columns = {name: batch.column(name).to_pylist() for name in batch.schema.names}
        values = columns["value"]
        for row, value in enumerate(values):
            kwargs: dict[str, Any] = {"value": value, "on_delivery": on_delivery}
            if "key" in columns:
                kwargs["key"] = columns["key"][row]
            if "partition" in columns and columns["partition"][row] is not None:
                kwargs["partition"] = columns["partition"][row]
            if "headers" in columns and columns["headers"][row]:
                kwargs["headers"] = [(h["key"], h["value"]) for h in columns["headers"][row]]
            topic = options.topic or columns["topic"][row]
            _produce(producer, topic, kwargs)
            sent += 1
        producer.poll(0)
        if failures:
            break
    remaining = producer.flush(options.flush_timeout_s)
    if failures:
        raise KafkaSinkError(
            f"{len(failures)} record(s) not delivered to {options.servers}, first: {failures[0]}"
        )
    if remaining:
        raise KafkaSinkError(
            f"{remaining} record(s) still unacknowledged by {options.servers} after "
            f"{options.flush_timeout_s:.0f}s (flushTimeoutMs); is the broker up?"
        )
    return SentRecords(sent)


def _produce(producer: Producer, topic: str, kwargs: dict[str, Any]) -> None:
    """Produce one record, waiting for queue space instead of failing on a full buffer."""
    while True:
        try:
            producer.produce(topic, **kwargs)
            return
        except BufferError:
            producer.poll(0.1)
        except KafkaException as exc:
            raise KafkaSinkError(f"cannot produce to {topic}: {exc}") from None


class KafkaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("streamsmith_kafka")``."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentRecords:
        return deliver(self.options, iterator)


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("streamsmith_kafka")``: every batch flushed before it commits."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentRecords:
        return deliver(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every task already flushed; nothing is pending at commit time."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records of a failed batch may be in the topic; the replay sends them again."""
