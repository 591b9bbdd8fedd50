"""Record the events a stateful flow drops as too late, so nothing disappears unexplained.

Spark drops events behind the watermark inside its stateful operators and reports only
a count (``numRowsDroppedByWatermark`` in the progress). streamsmith runs a companion
query per stateful flow that applies Spark's rule to the same events and writes the
dropped ones to the lake table ``<table>_late``: the events, how many of their windows
were dropped, the watermark that dropped them, and the micro-batch (``batch_id``).

The rule: an event is dropped from each window that ends at or before the watermark
(or, without windows, when its own time is at or before it). Which watermark: since
Spark 3.4, the one of the flow query's *previous* micro-batch, so whether Spark ran a
no-data batch in between matters. The companion therefore reads it from the flow
query's offset log, matching its own batch to the flow's batch that read up to the same
source offsets. The decision is kept with the batch (``batch_id=N`` is overwritten on
replay): exactly once.

The companion draws its micro-batches from the same source with the same trigger and
read limits as the flow's query, so the two cut the input the same way: always for
``available-now`` and ``once`` runs over a fixed backlog, and in practice under
``maxFilesPerTrigger`` or ``maxOffsetsPerTrigger``. When they do not (or the flow's
query stopped), it falls back to the watermark of its own earlier batches and logs a
warning; Spark's own count stays in the progress events as the reference. (A batch
before the flow's first watermark is not read at all, so the fallback does not know its
event times and may record fewer late events than Spark dropped.)
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import IntegerType, LongType, StructField, StructType, TimestampType

from streamsmith.config import Trigger, parse_duration
from streamsmith.io.lake import replace_batch_files, save_schema, start_foreach_batch
from streamsmith.monitor import observed
from streamsmith.monitor.progress import LATE_METRIC
from streamsmith.runtime.app import EventTime
from streamsmith.runtime.source_logs import (
    FileSourceLog,
    normal_path_column,
    offset_log_entry,
)
from streamsmith.transforms.events import too_late
from streamsmith.transforms.quarantine import SOURCE_FILE

log = logging.getLogger(__name__)

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
    flow_checkpoint: Path | None = None,
    file_source: bool = False,
) -> StreamingQuery:
    """Start the companion query writing ``events`` dropped by ``rule`` to ``path``.

    With ``flow_checkpoint`` (the flow's own query), the watermark is read from that
    query's offset log, as described in :func:`flow_late_watermark`; for a file source
    (``file_source``), per file, from the flow's batch that read it
    (:func:`flow_file_watermarks`).
    """
    if SOURCE_FILE in events.columns and not file_source:
        events = events.drop(SOURCE_FILE)
    save_schema(path, late_schema(events.drop(SOURCE_FILE).schema))
    max_times = MaxEventTimes(checkpoint / MAX_TIMES_DIR)
    delay_us = int(parse_duration(rule.delay) * 1_000_000)
    own_files = FileSourceLog(checkpoint) if file_source else None
    flow_files = FileSourceLog(flow_checkpoint) if file_source and flow_checkpoint else None

    def watermarks(batch_id: int) -> dict[int | None, list[str] | None] | None:
        """The batch's watermarks, each with its files (None: every event); None when
        the flow's query did not read the same input."""
        if flow_checkpoint is None:
            return None
        if own_files is not None and flow_files is not None:
            return flow_file_watermarks(flow_files, own_files, batch_id)
        found, watermark = flow_late_watermark(flow_checkpoint, checkpoint, batch_id)
        return {watermark: None} if found else None

    def write(batch: DataFrame, batch_id: int) -> None:
        groups = watermarks(batch_id)
        found = groups is not None
        if groups is None:
            groups = {max_times.watermark_before(batch_id, delay_us): None}
        known = {mark: files for mark, files in groups.items() if mark is not None}
        # One pass over the batch: the newest event time is observed while the late
        # events are filtered and written (no cache of the whole batch, no second read).
        newest = Observation(f"{name}-newest-{batch_id}")
        watched = batch.observe(newest, F.max(F.unix_micros(F.col(rule.column))).alias("us"))
        dropped = 0
        if known:
            watermark = _watermark_column(known)
            late = too_late(watched, rule.column, watermark, rule.window, rule.slide).select(
                "*", F.timestamp_micros(watermark).alias("watermark")
            )
            late = late.withColumn("windows_dropped", F.col("windows_dropped").cast("int"))
            late = late.withColumn(BATCH_COLUMN, F.lit(batch_id).cast("long")).drop(SOURCE_FILE)
            # Files moved in whole, named after the batch (no empty partition appears
            # and vanishes under a reader); a replay replaces them, or the partition an
            # earlier version wrote.
            shutil.rmtree(path / f"{BATCH_COLUMN}={batch_id}", ignore_errors=True)
            dropped = replace_batch_files(late, path, batch_id, (BATCH_COLUMN,))
        elif not found:  # the fallback needs this batch's newest time for later ones
            watched.select(rule.column).write.format("noop").mode("overwrite").save()
        # else: no watermark yet, so nothing is late, and the flow's own offset log
        # gives the watermarks of the batches to come: this batch is not read at all.
        if known or not found:
            max_times.record(batch_id, newest.get.get("us"))
        observed.note(name, batch_id, LATE_METRIC, dropped)

    return start_foreach_batch(events, write, name=name, checkpoint=checkpoint, trigger=trigger)


def _watermark_column(groups: dict[int, list[str] | None]) -> Column:
    """Per event, the watermark (µs) its input was read with: one for all, or per file."""
    column: Column | None = None
    for watermark, files in groups.items():
        if files is None or len(groups) == 1:
            return F.lit(watermark)
        read = normal_path_column(F.col(SOURCE_FILE)).isin(files)
        column = F.when(read, watermark) if column is None else column.when(read, watermark)
    assert column is not None
    return column


def flow_file_watermarks(
    flow: FileSourceLog, own: FileSourceLog, batch_id: int, wait_s: float = 60.0
) -> dict[int | None, list[str] | None] | None:
    """The watermarks (µs, None before the first) the flow's query dropped the late
    events of this batch's files with, each with its files; None when the flow's query
    has not planned the batches reading them within ``wait_s``.

    Two queries on one folder list it at different times, so their batches can take
    different files; matching by file, each file gets the watermark of the flow's batch
    that read it (that is, of the batch before it, as in :func:`flow_late_watermark`).
    """
    files = own.batch_files(batch_id)
    if files is None:
        return None
    deadline = time.monotonic() + wait_s
    while True:
        groups = _file_watermarks(flow, files)
        if groups is not None:
            return groups
        if time.monotonic() > deadline:
            log.warning(
                "late events of batch %s: the flow query %s has not read its %d file(s); "
                "using the watermark of earlier batches instead",
                batch_id,
                flow.checkpoint,
                len(files),
            )
            return None
        time.sleep(0.2)


def _file_watermarks(
    flow: FileSourceLog, files: list[str]
) -> dict[int | None, list[str] | None] | None:
    ids = flow.ids()
    batches = sorted(int(file.name) for file in (flow.checkpoint / "offsets").glob("[0-9]*"))
    ends = [(batch, end) for batch in batches if (end := flow.log_offset(batch)) is not None]
    groups: dict[int | None, list[str]] = {}
    for file in files:
        log_id = ids.get(file)
        # The first batch ending at or after the file's log id read it (no-data batches
        # after it repeat its end), if the batch before it still says where it ended.
        reader = None if log_id is None else next((b for b, end in ends if end >= log_id), None)
        if log_id is None or reader is None:
            return None
        before = flow.log_offset(reader - 1) if reader > 0 else -1
        if before is None or before >= log_id:
            return None
        groups.setdefault(_watermark_before(flow.checkpoint, reader), []).append(file)
    return {mark: members for mark, members in groups.items()}


def _watermark_before(checkpoint: Path, batch_id: int) -> int | None:
    """The watermark (µs, None before the first) Spark drops batch ``batch_id``'s late
    input with: the one recorded with the batch before it."""
    entry = offset_log_entry(checkpoint / "offsets" / str(batch_id - 1))
    watermark_ms = entry[0] if entry is not None else 0
    return watermark_ms * 1000 if watermark_ms > 0 else None


def flow_late_watermark(
    flow_checkpoint: Path, own_checkpoint: Path, batch_id: int, wait_s: float = 60.0
) -> tuple[bool, int | None]:
    """Whether the flow's query read this batch's input, and the watermark (µs, None
    before the first) it drops that input's late events with.

    Since Spark 3.4 a stateful operator drops late input with the watermark of the
    *previous* micro-batch (data or no-data batch), so the same events can be dropped or
    kept depending on whether Spark ran a no-data batch in between. The exact value is in
    the flow query's offset log: find its batch that read up to the same source offsets
    as this batch (the first one: no-data batches repeat the offsets) and take the
    watermark of the batch before it. Waits up to ``wait_s`` for the flow's query to plan
    that batch; not found when the two queries cut the input differently.
    """
    own = offset_log_entry(own_checkpoint / "offsets" / str(batch_id))
    if own is None:
        return False, None
    deadline = time.monotonic() + wait_s
    while True:
        entries = {
            int(file.name): entry
            for file in (flow_checkpoint / "offsets").glob("[0-9]*")
            if (entry := offset_log_entry(file)) is not None
        }
        match = min((i for i, e in entries.items() if e[1] == own[1]), default=None)
        if match is not None:
            return True, _watermark_before(flow_checkpoint, match)
        if time.monotonic() > deadline:
            log.warning(
                "late events of batch %s: the flow query %s never read the same input; "
                "using the watermark of earlier batches instead",
                batch_id,
                flow_checkpoint,
            )
            return False, None
        time.sleep(0.2)


def describe_rule(rule: EventTime) -> str:
    """One line for ``dry-run``."""
    windows = (
        f", windows {rule.window}" + (f" sliding {rule.slide}" if rule.slide else "")
        if rule.window
        else ""
    )
    return f"{rule.column} watermark {rule.delay}{windows}"
