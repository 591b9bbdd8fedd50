"""The Kafka topic sink: rows with ``key`` and ``value`` columns to a topic.

At least once: a batch replayed after a crash is produced again, with the same keys, so
consumers keeping the newest value per key (and compacted topics) see each result once.
Spark's JVM connector writes when it is on the classpath, streamsmith's otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import StructType

from streamsmith.config import ConfValue, SourceSpec
from streamsmith.errors import UserError
from streamsmith.io.kafka.login import jvm_login
from streamsmith.io.kafka.options import SOURCE_NAME
from streamsmith.io.sinks.base import (
    ALL_MODES,
    QueryArgs,
    Sink,
    SinkContext,
    SinkOptions,
    UpgradeRules,
)
from streamsmith.io.sources.kafka import jvm_kafka_available, read_kafka
from streamsmith.io.value_formats import encode_values, load_values
from streamsmith.spark.conf import start_foreach_batch_writer
from streamsmith.transforms.quarantine import dead_letters

DEAD_LETTER_SUFFIX = ".dead-letter"


class KafkaTopicOptions(SinkOptions):
    """``topic``: where rows go; ``options``: Kafka sink options (``kafka.*`` settings
    over the pipeline's ``kafka`` block); ``connector``: ``auto``, ``jvm`` or ``python``;
    ``dead_letter_topic``: where a real-time flow's rejected records go (by default the
    topic's name with ``.dead-letter`` appended); ``value_format: avro``: each row's
    columns but key, topic, partition and headers become its value, encoded with
    ``to_avro`` by ``value_schema`` (an .avsc file from the spec's folder; without it,
    the schema Spark derives from the columns), framed in the Confluent wire format
    when ``value_schema_id`` is set; ``value_format: protobuf``: the same columns become
    fields of message ``value_message`` of the descriptor set ``value_schema``, encoded
    in Python (a row that does not encode fails the batch, naming the field)."""

    topic: str
    connector: Literal["auto", "jvm", "python"] = "auto"
    options: dict[str, ConfValue] = Field(default_factory=dict)
    dead_letter_topic: str | None = None
    value_format: Literal["raw", "avro", "protobuf"] = "raw"
    value_schema: str | None = None
    value_message: str | None = None
    value_schema_id: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _value_settings_fit_the_format(self) -> KafkaTopicOptions:
        if self.value_format == "raw" and (
            self.value_schema is not None or self.value_schema_id is not None
        ):
            raise ValueError(
                "value_schema and value_schema_id are for value_format: avro or protobuf"
            )
        if (self.value_message is not None) != (self.value_format == "protobuf"):
            raise ValueError(
                "value_format: protobuf needs value_message (the full name of the values' "
                "message), and only it takes one"
            )
        if self.value_format == "protobuf" and self.value_schema is None:
            raise ValueError("value_format: protobuf needs value_schema, the descriptor set")
        return self

    @model_validator(mode="before")
    @classmethod
    def _a_topic_not_a_table(cls, data: Any) -> Any:
        if isinstance(data, dict) and (
            not data.get("topic") or any(data.get(k) for k in ("table", "key", "partition_by"))
        ):
            raise ValueError("a kafka sink needs a topic (and no table, key or partition_by)")
        return data


class KafkaTopicSink(Sink):
    """A Kafka topic; the flow's output has ``key`` and ``value`` columns (with
    ``value_format: avro`` or ``protobuf``, ``key`` and the columns the value's record
    holds)."""

    format: ClassVar[str] = "kafka"
    kind: ClassVar[str] = "topic"
    Options = KafkaTopicOptions
    output_modes = ALL_MODES
    upgrade = UpgradeRules("kafka")
    options: KafkaTopicOptions

    @property
    def target(self) -> str:
        return self.options.topic

    def __init__(self, options: KafkaTopicOptions, context: SinkContext) -> None:
        super().__init__(options, context)
        where = ".".join(context.key)
        try:
            context.spec.check_kafka_servers(where, options.options)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        # The sink's Kafka options over the pipeline-wide ``kafka`` block.
        self.settings = context.spec.kafka_options(options.options)
        self.value_schema = (
            None
            if options.value_schema is None
            else load_values(
                options.value_format,
                Path(options.value_schema),
                options.value_message,
                f"{where}.value_schema",
            )
        )

    def describe(self) -> str:
        return f"kafka topic {self.target}"

    @property
    def dead_letter_topic(self) -> str:
        """Where a real-time flow's rejected records go."""
        return self.options.dead_letter_topic or f"{self.target}{DEAD_LETTER_SUFFIX}"

    def dead_letter_sink(self) -> DeadLetterSink:
        """The dead-letter topic, written with this sink's Kafka settings, as JSON."""
        options = KafkaTopicOptions(
            topic=self.dead_letter_topic,
            connector=self.options.connector,
            options=self.options.options,
        )
        return DeadLetterSink(options, self.context)

    def counts_rows(self, spark: SparkSession) -> bool:
        """Spark's Kafka sink counts the rows it writes (measured equal to an observed
        count, micro-batches and Real-time Mode alike)."""
        return self._spark_connector(spark)

    def _spark_connector(self, spark: SparkSession) -> bool:
        connector = self.options.connector
        return connector == "jvm" or (connector == "auto" and jvm_kafka_available(spark))

    def _connector(self, spark: SparkSession) -> tuple[str, dict[str, str], bool]:
        """The format that writes the topic, its options, and whether it is Spark's."""
        spark_connector = self._spark_connector(spark)
        if not spark_connector:
            from streamsmith.io.kafka.source import register_kafka_source  # PyArrow: on use

            register_kafka_source(spark)
        settings = {key: _option(value) for key, value in self.settings.items()}
        settings["topic"] = self.target
        if spark_connector:
            return "kafka", jvm_login(settings), True
        return SOURCE_NAME, settings, False

    def start(self, spark: SparkSession, frame: DataFrame, query: QueryArgs) -> StreamingQuery:
        """Spark lets Python data sources stream in append mode only, so update and
        complete modes on streamsmith's connector write each micro-batch with its batch
        writer from ``foreachBatch``: the same producer, flush and failure rules, the same
        at-least-once guarantee."""
        fmt, settings, spark_connector = self._connector(spark)
        if self.options.value_format != "raw":
            frame = encode_values(frame, self.value_schema, self.options.value_schema_id)
        writer = (
            frame.writeStream.queryName(query.name)
            .outputMode(query.output_mode)
            .option("checkpointLocation", str(query.checkpoint))
            .trigger(**query.trigger.spark_kwargs())
        )
        if spark_connector or query.output_mode == "append":
            return writer.format(fmt).options(**settings).start()

        def write_batch(batch: DataFrame, _batch_id: int) -> None:
            batch.write.format(fmt).options(**settings).mode("append").save()

        return start_foreach_batch_writer(frame.sparkSession, writer.foreachBatch(write_batch))

    def reset(self) -> list[str]:
        """Topics are left alone: consumers may read them (delete them with Kafka's tools)."""
        return []

    def read_back(self, spark: SparkSession, schema: Callable[[], StructType]) -> DataFrame:
        """The topic as its current value per key (the newest record), keys and values
        as strings."""
        if self.options.value_format != "raw":
            raise UserError(
                f"kafka topic {self.target} holds {self.options.value_format} values, which "
                "reading a sink back "
                "(streamsmith.testing's prefix integrity) does not decode yet"
            )
        options = {**self.settings, "subscribe": self.target, "startingOffsets": "earliest"}
        source = SourceSpec(format="kafka", options=options)
        records = read_kafka(spark, source, streaming=False)
        order = F.struct("timestamp", "partition", "offset")
        return records.groupBy(F.col("key").cast("string").alias("key")).agg(
            F.max_by(F.col("value").cast("string"), order).alias("value")
        )


class DeadLetterSink(KafkaTopicSink):
    """A real-time flow's dead-letter topic: its quarantine query's rows (the quarantine
    table's columns), each sent as a Kafka record (:func:`dead_letters`). Its backfill
    writes those rows to the lake, as a micro-batch flow's quarantine does."""

    kind: ClassVar[str] = "dead-letter"

    def counts_rows(self, spark: SparkSession) -> bool:
        return False  # its queries write from foreachBatch (runtime.side_sinks)

    def start(self, spark: SparkSession, frame: DataFrame, query: QueryArgs) -> StreamingQuery:
        return super().start(spark, dead_letters(frame, self.context.flow), query)

    def append(self, rows: DataFrame) -> int:
        """Send quarantine ``rows`` (a batch frame) to the topic now; how many went.

        The records are kept (few: the rejects of a batch) between their count and their
        write, so the input is read once; an observed count would not come back from a
        write to Spark's Kafka sink."""
        fmt, settings, _ = self._connector(rows.sparkSession)
        letters = dead_letters(rows, self.context.flow).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            sent = letters.count()
            letters.write.format(fmt).options(**settings).mode("append").save()
        finally:
            letters.unpersist()
        return sent


def _option(value: ConfValue) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


SINK = KafkaTopicSink
