"""Record the events a stateful flow drops as too late, so nothing disappears unexplained.

Spark drops events behind the watermark inside its stateful operators and reports only
a count (``numRowsDroppedByWatermark`` in the progress). streamsmith runs a companion
query per stateful flow that applies Spark's rule to the same events and writes the
dropped ones to the lake table ``<table>_late``: the events, how many of their windows
were dropped, the watermark that dropped them, and the micro-batch (``batch_id``).

The rule: the watermark of batch N is the largest event time seen in batches before N,
minus the delay (never moving back); an event is dropped from each window that ends at
or before it (or, without windows, when its own time is at or before it). The companion
keeps the largest event time of each batch in its checkpoint folder, so a replayed batch
makes the same decision and overwrites its own ``batch_id=N`` partition: exactly once.

The companion draws its micro-batches from the same source with the same trigger and
read limits as the flow's query, so the two make the same decisions whenever they cut
the input into the same batches: always for ``available-now`` and ``once`` runs over a
fixed backlog, and in practice for streams under ``maxFilesPerTrigger`` or
``maxOffsetsPerTrigger``. Spark's own count stays in the progress events as the
reference.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import IntegerType, LongType, StructField, StructType, TimestampType

from streamsmith.config import Trigger, parse_duration
from streamsmith.io.lake import save_schema
from streamsmith.runtime.app import EventTime
from streamsmith.transforms.events import too_late

MAX_TIMES_DIR = "streamsmith_max_event_time"
BATCH_COLUMN = "batch_id"


def late_table(table: str) -> str:
    """Name of the table of events dropped as too late from ``table``."""
    return f"{table}_late"


def late_schema(events: StructType) -> StructType:
    """The late table's columns: the events, then why and when they were dropped."""
    return StructType(
        [
            *events.fields,
            StructField("windows_dropped", IntegerType(), nullable=False),
            StructField("watermark", TimestampType(), nullable=False),
            StructField(BATCH_COLUMN, LongType(), nullable=False),
        ]
    )


class MaxEventTimes:
    """The largest event time (µs) of each micro-batch, one small file per batch id."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def watermark_before(self, batch_id: int, delay_us: int) -> int | None:
        """Spark's watermark for ``batch_id``: None before any event time was seen."""
        seen = [
            int(file.read_text(encoding="utf-8"))
            for file in self.folder.glob("[0-9]*")
            if int(file.name) < batch_id
        ]
        return max(seen) - delay_us if seen else None

    def record(self, batch_id: int, max_us: int | None) -> None:
        if max_us is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        staging = self.folder / f".{batch_id}.tmp"
        staging.write_text(str(max_us), encoding="utf-8")
        staging.replace(self.folder / str(batch_id))


def start_late_stream(
    events: DataFrame,
    rule: EventTime,
    *,
    name: str,
    path: Path,
    checkpoint: Path,
    trigger: Trigger,
) -> StreamingQuery:
    """Start the companion query writing ``events`` dropped by ``rule`` to ``path``."""
    save_schema(path, late_schema(events.schema))
    max_times = MaxEventTimes(checkpoint / MAX_TIMES_DIR)
    delay_us = int(parse_duration(rule.delay) * 1_000_000)

    def write(batch: DataFrame, batch_id: int) -> None:
        watermark = max_times.watermark_before(batch_id, delay_us)
        target = path / f"{BATCH_COLUMN}={batch_id}"
        batch = batch.persist()
        try:
            latest = batch.agg(F.max(F.unix_micros(F.col(rule.column)))).first()
            dropped = 0
            if watermark is not None:
                late = too_late(batch, rule.column, watermark, rule.window, rule.slide).select(
                    "*",
                    F.lit(_timestamp(watermark)).alias("watermark"),
                )
                late = late.withColumn("windows_dropped", F.col("windows_dropped").cast("int"))
                late.write.mode("overwrite").parquet(str(target))
                dropped = batch.sparkSession.read.parquet(str(target)).count()
            if not dropped and target.exists():
                shutil.rmtree(target)  # no empty partitions: keep the table listing clean
            max_times.record(batch_id, latest[0] if latest else None)
        finally:
            batch.unpersist()

    return (
        events.writeStream.queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger.spark_kwargs())
        .foreachBatch(write)
        .start()
    )


def _timestamp(micros: int) -> datetime:
    return datetime.fromtimestamp(micros / 1_000_000, tz=UTC)


def describe_rule(rule: EventTime) -> str:
    """One line for ``dry-run``."""
    windows = (
        f", windows {rule.window}" + (f" sliding {rule.slide}" if rule.slide else "")
        if rule.window
        else ""
    )
    return f"{rule.column} watermark {rule.delay}{windows}"
