"""Child process of the Kafka crash test: stream a topic into Parquet until killed.

Run as ``python kafka_to_parquet_child.py BOOTSTRAP TOPIC OUT CHECKPOINT TRIGGER
[OPTION=VALUE ...]`` with TRIGGER ``available-now`` or ``interval=<duration>`` and further
source options; it prints nothing and exits 0 when an ``available-now`` run is done.
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from streamsmith.config import SparkSpec, parse_trigger
from streamsmith.io.kafka.source import SOURCE_NAME, register_kafka_source
from streamsmith.spark.session import build_session


def run(bootstrap: str, topic: str, out: str, checkpoint: str, trigger: str, *options: str) -> None:
    spark = build_session(
        SparkSpec(master="local[2]", conf={"spark.sql.shuffle.partitions": 2}), "kafka-crash"
    )
    start(spark, bootstrap, topic, out, checkpoint, trigger, *options).awaitTermination()


def start(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    out: str,
    checkpoint: str,
    trigger: str,
    *options: str,
) -> StreamingQuery:
    """The query, started in ``spark`` (a restart runs in the test's own session)."""
    register_kafka_source(spark)
    records = (
        spark.readStream.format(SOURCE_NAME)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "300")
        .options(**dict(option.split("=", 1) for option in options))
        .load()
        .select("partition", "offset", "value")
    )
    return (
        records.writeStream.format("parquet")
        .option("checkpointLocation", checkpoint)
        .trigger(**parse_trigger(trigger).spark_kwargs())
        .start(out)
    )


if __name__ == "__main__":
    run(*sys.argv[1:])
