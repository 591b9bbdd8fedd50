"""Log curation (e-book Part 3): collector envelopes to one structured log table.

Each entry is parsed from JSON with ``from_json`` or from a log4j line with
``regexp_extract``, into the same columns either way: ``log_time``, ``level``,
``thread``, ``logger`` and the message ``text``. An entry that is neither goes to
quarantine with its raw envelope. Collector retries are dropped on the collector's
``(id, seq)`` and collection time, within the watermark. Log4j lines carry no time
zone: they are read in the session time zone (UTC, see ``streamsmith.spark.session``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamsmith.schemas.logs import ENVELOPE_SCHEMA, JSON_MESSAGE_SCHEMA
from streamsmith.transforms.events import parse_events

EVENT_TIME = "collected_at"
LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL")
# 2026-11-20 10:02:13,481 ERROR [pool-3-thread-2] org.acme.Billing - charge failed
LOG4J_LINE = (
    r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3})\s+(" + "|".join(LEVELS) + r")\s+"
    r"\[([^\]]*)\]\s+(\S+)\s+-\s(.*)$"
)
LOG4J_TIME = "yyyy-MM-dd HH:mm:ss,SSS"


def _is_json(message: Column) -> Column:
    return F.ltrim(message).startswith("{")


def _log4j(message: Column, group: int) -> Column:
    """One group of the log4j pattern; null (not Spark's empty string) when it fails."""
    found = F.regexp_extract(message, LOG4J_LINE, group)
    return F.when(found != "", found)


def entry_fields(message: Column) -> dict[str, Column]:
    """The structured fields of a log entry, from JSON or from a log4j line."""
    as_json = F.from_json(message, JSON_MESSAGE_SCHEMA)
    json_entry = _is_json(message)
    return {
        "log_time": F.when(json_entry, as_json["ts"]).otherwise(
            F.to_timestamp(_log4j(message, 1), LOG4J_TIME)
        ),
        "level": F.when(json_entry, F.upper(as_json["level"])).otherwise(_log4j(message, 2)),
        "thread": F.when(json_entry, as_json["thread"]).otherwise(_log4j(message, 3)),
        "logger": F.when(json_entry, as_json["logger"]).otherwise(_log4j(message, 4)),
        "text": F.when(json_entry, as_json["message"]).otherwise(_log4j(message, 5)),
        "format": F.when(json_entry, F.lit("json")).otherwise(F.lit("log4j")),
    }


def log_entries(source: DataFrame) -> DataFrame:
    """Typed, structured log entries tagged for quarantine: a bad envelope, missing
    collector metadata, or a message that is neither a JSON entry nor a log4j line."""
    fields = entry_fields(F.col("message"))
    parsed = parse_events(
        source,
        ENVELOPE_SCHEMA,
        required=("service", "host", "collected_at", "message"),
        rules=(
            (
                F.col("collector.id").isNull() | F.col("collector.seq").isNull(),
                "missing collector metadata (collector.id, collector.seq)",
            ),
            (
                fields["log_time"].isNull() | ~fields["level"].isin(*LEVELS),
                "unparseable message: neither a JSON entry with ts and a known level "
                "nor a log4j line",
            ),
        ),
    )
    return parsed.select(
        "*",
        *(column.alias(name) for name, column in fields.items()),
        F.col("collector.id").alias("collector_id"),
        F.col("collector.seq").alias("collector_seq"),
    ).drop("collector", "message")


def curated_logs(entries: DataFrame, delay: str = "10 minutes") -> DataFrame:
    """Entries without collector retries, dated by their own time for partitioning.

    A retry re-sends the envelope unchanged, ``collected_at`` included, so the key holds
    the event time and the watermark can evict it (``dropDuplicatesWithinWatermark``
    would not run as a batch job, and backfills use the same code).
    """
    return (
        entries.withWatermark(EVENT_TIME, delay)
        .dropDuplicates(["collector_id", "collector_seq", EVENT_TIME])
        .withColumn("date", F.to_date("log_time"))
    )
