"""Streaming sinks for flows: Kafka topics, PostgreSQL tables and memory tables.

Kafka goes through Spark's JVM connector when present and streamsmith's otherwise.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from streamsmith.config import ConfValue, Trigger
from streamsmith.io.kafka.source import SOURCE_NAME, register_kafka_source
from streamsmith.io.lake import start_foreach_batch
from streamsmith.io.postgres.sink import PostgresTarget, servable, setup_target, write_batch
from streamsmith.io.sources import jvm_kafka_available

# Set by Spark on the thread running a micro-batch: the query's id, kept in its checkpoint.
QUERY_ID_PROPERTY = "sql.streaming.queryId"


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
    spark_connector = connector == "jvm" or (connector == "auto" and jvm_kafka_available(spark))
    if not spark_connector:
        register_kafka_source(spark)
    fmt = "kafka" if spark_connector else SOURCE_NAME
    settings = {key: _option(value) for key, value in options.items()}
    settings["topic"] = topic
    writer = (
        frame.writeStream.queryName(name)
        .outputMode(output_mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger.spark_kwargs())
    )
    if spark_connector or output_mode == "append":
        return writer.format(fmt).options(**settings).start()

    def write_batch(batch: DataFrame, _batch_id: int) -> None:
        batch.write.format(fmt).options(**settings).mode("append").save()

    return writer.foreachBatch(write_batch).start()


def _option(value: ConfValue) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def start_postgres_stream(
    frame: DataFrame,
    target: PostgresTarget,
    *,
    name: str,
    checkpoint: Path,
    trigger: Trigger,
) -> StreamingQuery:
    """Start a named query keeping ``target`` in PostgreSQL, exactly once per batch.

    The table and ledger are created (or checked) before the query starts, so a schema
    mismatch is reported at once instead of failing the first batch.
    """
    setup_target(target, servable(frame).schema)

    def write(batch: DataFrame, batch_id: int) -> None:
        query_id = batch.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
        write_batch(target, batch, batch_id, query_id or name)

    return start_foreach_batch(
        frame,
        write,
        name=name,
        checkpoint=checkpoint,
        trigger=trigger,
        output_mode=target.output_mode,
    )


def start_memory_stream(
    frame: DataFrame, *, name: str, table: str, checkpoint: Path, trigger: Trigger, output_mode: str
) -> StreamingQuery:
    """Start a query keeping ``table`` in the driver's memory for interactive SQL.

    Spark's memory sink cannot resume from a checkpoint, so each run starts a fresh
    checkpoint and rebuilds the table from the source.
    """
    if checkpoint.exists():
        shutil.rmtree(checkpoint)
    return (
        frame.writeStream.queryName(table)
        .format("memory")
        .outputMode(output_mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger.spark_kwargs())
        .start()
    )
