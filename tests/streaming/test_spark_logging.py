"""The log configuration streamsmith gives Spark (src/streamsmith/log4j2.properties), as
the session's JVM loaded it: expected messages are muted, others of the same loggers
still show."""

from __future__ import annotations

from pyspark.sql import SparkSession


def verdict(spark: SparkSession, logger: str, level: str, message: str) -> str:
    """What the logger's configuration does with ``message``: ACCEPT, NEUTRAL or DENY
    (the level, then the logger's filters; NEUTRAL passes)."""
    log4j = spark.sparkContext._jvm.org.apache.logging.log4j  # type: ignore[union-attr]
    config = log4j.LogManager.getContext(False).getConfiguration().getLoggerConfig(logger)
    if not config.getLevel().isLessSpecificThan(log4j.Level.getLevel(level)):
        return "DENY"
    event = (
        log4j.core.impl.Log4jLogEvent.newBuilder()
        .setLoggerName(logger)
        .setLevel(log4j.Level.getLevel(level))
        .setMessage(log4j.message.SimpleMessage(message))
        .build()
    )
    found = config.getFilter()
    return "NEUTRAL" if found is None else str(found.filter(event).name())


def test_a_merge_releasing_its_local_checkpoint_warns_nobody(spark: SparkSession) -> None:
    # Delta's MERGE prints this once per merge; a user can do nothing about it.
    released = (
        "RDD 241 was locally checkpointed, its lineage has been truncated and cannot be "
        "recomputed after unpersisting"
    )
    assert verdict(spark, "org.apache.spark.rdd.MapPartitionsRDD", "WARN", released) == "DENY"
    other = "Spark is not running in local mode, so the checkpoint directory must not be local"
    assert verdict(spark, "org.apache.spark.rdd.MapPartitionsRDD", "WARN", other) == "NEUTRAL"
