"""Kafka sinks for flows: the JVM connector when present, streamsmith's otherwise."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from streamsmith.config import ConfValue, Trigger
from streamsmith.io.kafka.source import SOURCE_NAME, register_kafka_source
from streamsmith.io.sources import jvm_kafka_available


def start_topic_stream(
    spark: SparkSession,
    frame: DataFrame,
    *,
    name: str,
    topic: str,
    options: Mapping[str, ConfValue],
    connector: str,
    checkpoint: Path,
    trigger: Trigger,
    output_mode: str,
) -> StreamingQuery:
    """Start a named streaming query writing ``frame`` (key, value, ...) to a Kafka topic.

    Spark lets Python data sources stream in append mode only, so update and complete
    modes on streamsmith's connector write each micro-batch with its batch writer from
    ``foreachBatch``: the same producer, flush and failure rules, the same at-least-once
    guarantee.
    """
    use_jvm = connector == "jvm" or (connector == "auto" and jvm_kafka_available(spark))
    if not use_jvm:
        register_kafka_source(spark)
    fmt = "kafka" if use_jvm else SOURCE_NAME
    settings = {key: _option(value) for key, value in options.items()}
    settings["topic"] = topic
    writer = (
        frame.writeStream.queryName(name)
        .outputMode(output_mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger.spark_kwargs())
    )
    if use_jvm or output_mode == "append":
        return writer.format(fmt).options(**settings).start()

    def write_batch(batch: DataFrame, _batch_id: int) -> None:
        batch.write.format(fmt).options(**settings).mode("append").save()

    return writer.foreachBatch(write_batch).start()


def _option(value: ConfValue) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
