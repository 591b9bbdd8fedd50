"""Let a flow's quarantine query skip the input its main query found clean.

The quarantine query of a flow reads the same input as the flow's main query, so each
record would be parsed twice although most batches hold nothing to quarantine; on the
YSB benchmark that second parse was most of what streamsmith cost over bare Spark. The
main query therefore counts the rows it rejects in each micro-batch (an observed metric,
computed in the pass it makes anyway: ``streamsmith.runtime.flow_batches``). Before
reading a batch, the quarantine query finds the main query's batches that read the same
files or Kafka offsets and reads nothing when they rejected no row. From files, the
main query's metric also carries the batch's rejected rows when they are few; the
quarantine query then writes those instead of reading and parsing the input again
(:func:`carried_frame`), so dirty input is read once too.

When it cannot tell (the main query is not running in this process, ran that input
before a restart, has not reached it within the wait, or reported the batch without
running it: Spark's file sink skips a batch it had committed before a crash and reports
zeros, see ``FlowFacts``), it reads the batch as before: skipping is an optimisation,
never a guess. The quarantine rows of a batch are committed to a Delta table with the
batch id as its idempotent-write mark (a Parquet table: written under names carrying the
batch id and replaced when the batch is replayed), so the table stays exactly-once
without a streaming sink (which cannot skip a batch).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import LongType, StringType, StructField, StructType

from streamsmith.config import Trigger
from streamsmith.io.delta_marks import check_replay
from streamsmith.io.lake import (
    COMMIT_LOG,
    TableFormat,
    prepare_table,
    start_foreach_batch,
    write_batch,
)
from streamsmith.monitor import observed
from streamsmith.monitor.progress import QUARANTINE_METRIC
from streamsmith.runtime.flow_batches import CARRIED_COLUMNS, Facts, FlowCover, FlowFacts, Part
from streamsmith.transforms.quarantine import quarantined

log = logging.getLogger(__name__)
BATCH = "_flow_batch"  # which main-query batch carried a row


def can_skip_clean_input(
    quarantine_path: Path, table_format: TableFormat, *, single_input: bool
) -> bool:
    """Whether a quarantine query can skip batches its flow found clean: a flow reading
    one source, and a table not already kept by Spark's Parquet file sink (its commit
    log would hide files written any other way)."""
    if table_format == "delta":
        return single_input
    return single_input and not (quarantine_path / COMMIT_LOG).exists()


def carried_frame(
    spark: SparkSession, parts: Sequence[Part], seen: Mapping[int, Facts]
) -> DataFrame | None:
    """The quarantine rows of a side batch made of ``parts``, from the rejected rows the
    main query carried in its reports; None when a part's batch did not carry all of its
    rejects (the side batch then reads its input). A main batch may have read more than
    this side batch did, so each part keeps the rows of its own input."""
    if any(seen[part.batch].rejects is None for part in parts if seen[part.batch].rejected):
        return None
    import pyarrow as pa

    carried = [(part.batch, row) for part in parts for row in seen[part.batch].rejects or ()]
    columns = {
        name: pa.array([row.get(name) for _, row in carried], pa.string())
        for name in CARRIED_COLUMNS
    }
    columns[BATCH] = pa.array([batch for batch, _ in carried], pa.int64())
    kinds = {name: LongType() if name == BATCH else StringType() for name in columns}
    schema = StructType([StructField(name, kind) for name, kind in kinds.items()])
    # From Arrow, in the JVM: a list of rows would be unpickled by Python workers, which
    # a run over files would start for this alone (issue 50: six of them, about 400 MB).
    found = spark.createDataFrame(pa.table(columns), schema)
    mine = F.lit(False)
    for part in parts:
        mine = mine | ((F.col(BATCH) == part.batch) & part.rows())
    return quarantined(found.where(mine))


def start_quarantine_stream(
    frame: DataFrame,
    *,
    name: str,
    path: Path,
    checkpoint: Path,
    trigger: Trigger,
    partition_by: tuple[str, ...],
    cover: FlowCover,
    facts: FlowFacts,
    table_format: TableFormat,
    app_id: str,
) -> StreamingQuery:
    """Start the quarantine query writing ``frame`` to ``path``, skipping batches whose
    input the flow's main query found clean. Rows read from files of lines hold their
    line and its number from the flow's read (``io.files``): no file is read again."""
    prepare_table(frame.sparkSession, path, frame.schema, partition_by, table_format)

    def write_rows(batch: DataFrame, batch_id: int) -> int:
        return write_batch(batch, path, batch_id, partition_by, app_id=app_id)

    check_replay(path, app_id, checkpoint)
    return start_following_quarantine(
        frame,
        name=name,
        checkpoint=checkpoint,
        trigger=trigger,
        cover=cover,
        facts=facts,
        write_rows=write_rows,
    )


def start_following_quarantine(
    frame: DataFrame,
    *,
    name: str,
    checkpoint: Path,
    trigger: Trigger,
    cover: FlowCover,
    facts: FlowFacts,
    write_rows: Callable[[DataFrame, int], int],
) -> StreamingQuery:
    """Start a quarantine query over ``frame`` (its rows in the quarantine's columns)
    that hands ``write_rows`` each batch the flow's main query did not find clean, or
    the rows it carried, once the main query has committed that input; ``write_rows``
    says how many rows it wrote."""

    def write(batch: DataFrame, batch_id: int) -> None:
        parts = cover.parts(batch_id)
        seen = None if parts is None else facts.of([part.batch for part in parts])
        rows = 0
        if seen is None or any(found.rejected for found in seen.values()):
            carried = (
                None
                if parts is None or seen is None
                else carried_frame(batch.sparkSession, parts, seen)
            )
            if carried is not None:  # the input needs no second read
                log.debug("%s writes batch %s from flow batches %s", name, batch_id, parts)
                batch = carried
            else:
                why = "its flow batches' rejects are unknown" if seen is None else "rejects"
                log.debug("%s reads batch %s (%s; flow batches %s)", name, batch_id, why, parts)
            rows = write_rows(batch, batch_id)
        observed.note(name, batch_id, QUARANTINE_METRIC, rows)

    return start_foreach_batch(frame, write, name=name, checkpoint=checkpoint, trigger=trigger)
