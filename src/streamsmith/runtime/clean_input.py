"""Let a file-fed flow's quarantine query skip the input its main query found clean.

The quarantine query of a flow reads the same files as the flow's main query, so each
file is parsed twice although most batches hold nothing to quarantine; on the YSB
benchmark that second parse was most of what streamsmith cost over bare Spark. The main
query therefore counts the rows it rejects in each micro-batch (an observed metric,
computed in the pass it makes anyway). Before reading a batch, the quarantine query
finds the main query's batches that read the same files (the file source's log in the
main query's checkpoint says which file went into which batch) and reads nothing when
they rejected no row.

When it cannot tell (the main query is not running in this process, ran those files
before a restart, or has not reached them within the wait), it reads the batch as
before: skipping is an optimisation, never a guess. The quarantine rows of a batch are
written under names carrying the batch id and replaced when the batch is replayed, so
the table stays exactly-once without Spark's file sink (which cannot skip a batch).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from streamsmith.config import Trigger
from streamsmith.io.lake import COMMIT_LOG, replace_batch_files, save_schema, start_foreach_batch
from streamsmith.monitor import observed
from streamsmith.monitor.progress import QUARANTINE_METRIC
from streamsmith.runtime.source_logs import FileSourceLog, log_offset, normal_path
from streamsmith.transforms.quarantine import REJECT_REASON

log = logging.getLogger(__name__)

REJECTS_METRIC = "streamsmith_rejects"


def observe_rejects(tagged: DataFrame) -> DataFrame:
    """``tagged`` counting, per micro-batch, the rows it rejects (``REJECTS_METRIC``)."""
    if REJECT_REASON not in tagged.columns:
        return tagged
    count = F.count_if(F.col(REJECT_REASON).isNotNull()).alias("rows")
    return tagged.observe(REJECTS_METRIC, count)


def can_skip_clean_input(quarantine_path: Path, *, file_source: bool, single_input: bool) -> bool:
    """Whether a quarantine query can skip batches its flow found clean: a flow reading
    one file source, and a table not already kept by Spark's file sink (its commit log
    would hide files written any other way)."""
    return file_source and single_input and not (quarantine_path / COMMIT_LOG).exists()


@dataclass
class FlowReads:
    """What the flow's main query (``query_name``, checkpoint ``checkpoint``) rejected
    in the batches that read given files, as far as this process saw it."""

    spark: SparkSession
    query_name: str
    checkpoint: Path
    wait_s: float = 600.0
    _log: FileSourceLog = field(init=False)

    def __post_init__(self) -> None:
        self._log = FileSourceLog(self.checkpoint)

    def rejected(self, files: list[str]) -> int | None:
        """Rows rejected in the flow's batches that read ``files``; None when unknown.

        Waits (up to ``wait_s``) while the flow's query runs and has not finished the
        batches that read them."""
        deadline = time.monotonic() + self.wait_s
        while True:
            query = self._query()
            if query is None:
                return None
            found, rejected = self._rejected(files, query)
            if found:
                return rejected
            if time.monotonic() > deadline:
                log.info("%s had not read %d file(s) after %.0fs", self.query_name, len(files),
                         self.wait_s)  # fmt: skip
                return None
            time.sleep(0.2)

    def _query(self) -> StreamingQuery | None:
        return next((q for q in self.spark.streams.active if q.name == self.query_name), None)

    def _rejected(self, files: list[str], query: StreamingQuery) -> tuple[bool, int | None]:
        """(whether it is settled, the count): not settled while the flow has yet to
        finish a batch reading one of ``files``."""
        log_ids = self._log.ids()
        batches = [_batch_facts(json.loads(progress.json)) for progress in query.recentProgress]
        known = [facts for facts in batches if facts is not None]
        total = 0
        for file in files:
            log_id = log_ids.get(normal_path(file))
            if log_id is None:
                return False, None  # not listed by the flow's query yet
            covering = next((f for f in known if f[0] < log_id <= f[1]), None)
            if covering is None:
                if known and log_id <= min(f[0] for f in known):
                    return True, None  # read before this run's first recorded batch
                return False, None
            if covering[2] is None:
                return True, None
            total += covering[2]
        return True, total


def _batch_facts(progress: dict[str, Any]) -> tuple[int, int, int | None] | None:
    """(first log id exclusive, last log id, rejected rows) of one file-source batch."""
    sources = progress.get("sources") or []
    if len(sources) != 1:
        return None
    start, end = (log_offset(sources[0].get(key)) for key in ("startOffset", "endOffset"))
    if end is None:
        return None
    rows = (progress.get("observedMetrics") or {}).get(REJECTS_METRIC, {}).get("rows")
    return (-1 if start is None else start), end, (None if rows is None else int(rows))


def start_quarantine_stream(
    frame: DataFrame,
    *,
    name: str,
    path: Path,
    checkpoint: Path,
    trigger: Trigger,
    partition_by: tuple[str, ...],
    flow: FlowReads,
) -> StreamingQuery:
    """Start the quarantine query writing ``frame`` to ``path``, skipping batches whose
    files the flow's main query found clean."""
    save_schema(path, frame.schema)
    own = FileSourceLog(checkpoint)

    def write(batch: DataFrame, batch_id: int) -> None:
        files = own.batch_files(batch_id)
        rejected = None if files is None else flow.rejected(files)
        rows = 0
        if rejected != 0:
            rows = replace_batch_files(batch, path, batch_id, partition_by)
        observed.note(name, batch_id, QUARANTINE_METRIC, rows)

    return start_foreach_batch(frame, write, name=name, checkpoint=checkpoint, trigger=trigger)
