"""Let a flow's quarantine query skip the input its main query found clean.

The quarantine query of a flow reads the same input as the flow's main query, so each
record would be parsed twice although most batches hold nothing to quarantine; on the
YSB benchmark that second parse was most of what streamsmith cost over bare Spark. The
main query therefore counts the rows it rejects in each micro-batch (an observed metric,
computed in the pass it makes anyway: ``streamsmith.runtime.flow_batches``). Before
reading a batch, the quarantine query finds the main query's batches that read the same
files or Kafka offsets and reads nothing when they rejected no row.

When it cannot tell (the main query is not running in this process, ran that input
before a restart, has not reached it within the wait, or reported the batch without
running it: Spark's file sink skips a batch it had committed before a crash and reports
zeros, see ``FlowFacts``), it reads the batch as before: skipping is an optimisation,
never a guess. The quarantine rows of a batch are written
under names carrying the batch id and replaced when the batch is replayed, so the table
stays exactly-once without Spark's file sink (which cannot skip a batch).
"""

from __future__ import annotations

import logging
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql.streaming.query import StreamingQuery

from streamsmith.config import Trigger
from streamsmith.io.lake import COMMIT_LOG, replace_batch_files, save_schema, start_foreach_batch
from streamsmith.monitor import observed
from streamsmith.monitor.progress import QUARANTINE_METRIC
from streamsmith.runtime.flow_batches import FlowCover, FlowFacts

log = logging.getLogger(__name__)


def can_skip_clean_input(quarantine_path: Path, *, single_input: bool) -> bool:
    """Whether a quarantine query can skip batches its flow found clean: a flow reading
    one source, and a table not already kept by Spark's file sink (its commit log would
    hide files written any other way)."""
    return single_input and not (quarantine_path / COMMIT_LOG).exists()


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
) -> StreamingQuery:
    """Start the quarantine query writing ``frame`` to ``path``, skipping batches whose
    input the flow's main query found clean."""
    save_schema(path, frame.schema)

    def write(batch: DataFrame, batch_id: int) -> None:
        parts = cover.parts(batch_id)
        seen = None if parts is None else facts.of([part.batch for part in parts])
        rows = 0
        if seen is None or any(found.rejected for found in seen.values()):
            why = "its flow batches' rejects are unknown" if seen is None else "rejects"
            log.debug("%s reads batch %s (%s; flow batches %s)", name, batch_id, why, parts)
            rows = replace_batch_files(batch, path, batch_id, partition_by)
        observed.note(name, batch_id, QUARANTINE_METRIC, rows)

    return start_foreach_batch(frame, write, name=name, checkpoint=checkpoint, trigger=trigger)
