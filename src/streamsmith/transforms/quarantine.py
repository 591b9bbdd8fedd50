"""Route rejected records to a quarantine table instead of dropping them.

A transform that can reject input returns a *tagged* frame: the output columns plus
lineage columns (``_source_file``, ``_position``, ``_raw``) and ``_reject_reason``, which
is null for accepted rows. :func:`accepted` and :func:`quarantined` split it, so
``input = accepted + quarantined`` holds by construction.

A file reader may also keep ``_raw_text`` (the raw payload where it has it as text for
free: a line, a malformed record) and ``_record`` (a parsed record whole), from which
:func:`deferred_raw` gives ``_raw`` as an expression: computed inside a ``CASE`` for the
few rejected rows, where the ``_raw`` column (a parsed record as JSON) would be computed
for every row of a query that keeps it.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, StringType, StructField, StructType, TimestampType

from streamsmith.transforms.json_reasons import MALFORMED_VALUE

SOURCE_FILE = "_source_file"
POSITION = "_position"
RAW = "_raw"
READ_ERROR = "_read_error"
REJECT_REASON = "_reject_reason"
NEW_FIELDS = "_new_fields"  # fields a record holds beyond its schema (schema evolution)
RAW_TEXT = "_raw_text"  # the raw payload where a reader holds it as text, else null
RECORD = "_record"  # a parsed record whole: its JSON is the raw payload (see deferred_raw)
SOURCE_MS = "_source_ms"  # a Kafka record's timestamp (ms): the flow's latency counts from it
# Why a record a parser rejected as malformed did not parse (the field whose value does
# not fit), where REJECT_REASON holds the parser's short reason (MALFORMED_VALUE): only a
# quarantine reads it, so a flow's own query never plans the diagnosis (a large
# expression per field of the schema) at each batch.
REASON_DETAIL = "_reason_detail"
TAG_COLUMNS = (
    SOURCE_FILE, POSITION, RAW, READ_ERROR, REJECT_REASON, NEW_FIELDS, RAW_TEXT, RECORD,
    SOURCE_MS, REASON_DETAIL,
)  # fmt: skip

QUARANTINE_SCHEMA = StructType(
    [
        StructField("reason", StringType(), nullable=False),
        StructField("source_file", StringType()),
        StructField("position", StringType()),
        StructField("raw", StringType()),
        StructField("ingested_at", TimestampType()),
        StructField("ingest_date", DateType()),
    ]
)
QUARANTINE_PARTITION_BY = ("ingest_date",)


def quarantine_table(table: str) -> str:
    """Name of the quarantine table that belongs to ``table``."""
    return f"{table}_quarantine"


def first_failure(*checks: tuple[Column, Column | str]) -> Column:
    """The reason of the first ``(failed_condition, reason)`` pair that holds, else null.

    Order matters: put the most fundamental problem first (unreadable before malformed
    before missing fields), so the reason names the root cause.
    """
    reasons = [
        F.when(failed, reason if isinstance(reason, Column) else F.lit(reason))
        for failed, reason in checks
    ]
    return F.coalesce(*reasons)


def reject_reason(*checks: tuple[Column, Column | str]) -> Column:
    """A record's reason to be rejected: its read error (``_read_error``) as it is, else
    the first of ``checks`` that fails (:func:`first_failure`). No ``CASE`` around the
    read error: a smaller expression for Spark to plan at every batch (a real-time query
    plans at every checkpoint)."""
    read_error = F.col(READ_ERROR)
    return F.coalesce(read_error, first_failure(*checks)) if checks else read_error


def deferred_raw(tagged: DataFrame) -> Column | None:
    """``_raw`` as an expression over what the reader kept (``_raw_text``, ``_record``),
    for a consumer that needs it for few rows; None when the frame keeps neither."""
    if RAW_TEXT not in tagged.columns:
        return None
    if RECORD not in tagged.columns:
        return F.col(RAW_TEXT)
    return F.coalesce(F.col(RAW_TEXT), F.to_json(F.col(RECORD)))


def accepted(tagged: DataFrame, keep: Sequence[str] = ()) -> DataFrame:
    """Rows that passed every check, without the tag columns (but those in ``keep``)."""
    present = [name for name in TAG_COLUMNS if name in tagged.columns and name not in keep]
    return tagged.where(F.col(REJECT_REASON).isNull()).drop(*present)


def quarantined(tagged: DataFrame) -> DataFrame:
    """Rejected rows in the quarantine schema: why, from where, and the raw payload.
    None of a frame that tags no rejects (a flow's code that rejects nothing): Spark
    then plans the query without reading its source."""

    def column(name: str) -> Column:
        return F.col(name) if name in tagged.columns else F.lit(None)

    reason = column(REJECT_REASON).cast("string")
    refined = F.when(reason == MALFORMED_VALUE, column(REASON_DETAIL).cast("string"))
    return (
        tagged.where(reason.isNotNull())
        .select(
            F.coalesce(refined, reason).alias("reason"),
            column(SOURCE_FILE).cast("string").alias("source_file"),
            column(POSITION).cast("string").alias("position"),
            # Parquet strings are UTF-8: bytes that are not keep their place as U+FFFD,
            # so every reader of the table can read the row (the reason says so).
            F.make_valid_utf8(column(RAW).cast("string")).alias("raw"),
            F.current_timestamp().alias("ingested_at"),
        )
        .withColumn("ingest_date", F.to_date("ingested_at"))
    )


def dead_letters(rows: DataFrame, flow: str) -> DataFrame:
    """Quarantine ``rows`` (:func:`quarantined`) as Kafka records for a dead-letter topic,
    where a real-time flow sends what a micro-batch flow keeps in its quarantine table:
    the value is the row as JSON (with the flow's name), the key the record's place
    (``kafka://topic/partition/offset``), the same when a replay produces it again, so a
    consumer keeps one per key."""
    rows = rows.drop("ingest_date")
    return rows.select(
        F.concat_ws("/", "source_file", "position").alias("key"),
        F.to_json(F.struct(F.lit(flow).alias("flow"), *rows.columns)).alias("value"),
    )
