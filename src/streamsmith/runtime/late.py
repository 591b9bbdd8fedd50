"""Record the events a stateful flow drops as too late, so nothing disappears unexplained.

Spark drops events behind the watermark inside its stateful operators and reports only
a count (``numRowsDroppedByWatermark`` in the progress). streamsmith runs a companion
query per stateful flow that applies Spark's rule to the same events and writes the
dropped ones to the lake table ``<table>_late``: the events, how many of their windows
were dropped, the watermark that dropped them, and the micro-batch (``batch_id``).

The rule: an event is dropped from each window that ends at or before the watermark
(or, without windows, when its own time is at or before it). Which watermark: since
Spark 3.4, the one of the flow query's *previous* micro-batch, so whether Spark ran a
no-data batch in between matters. The companion therefore finds, for each event, the
flow query's batch that read it (by file, or by Kafka partition and offset:
``streamsmith.runtime.flow_batches``) and takes the watermark logged with the batch
before that one. The two queries need not cut the input alike. The decision is kept
with the batch (``batch_id=N`` is overwritten on replay): exactly once.

Most batches hold no late event. The flow's query observes the oldest accepted event
time of each of its batches; when it was on time for that batch's watermark, so were
all the others, and the companion does not read its batch at all. (It reads whenever it
cannot tell: the flow's query runs in another process, or ran those batches before a
restart.)

For a flow reading several sources, batches are matched whole: the flow's batch that
read up to the same offsets. When none does (or the flow's logs are gone), the
companion falls back to the watermark of its own earlier batches and logs a warning;
Spark's own count stays in the progress events as the reference. (A batch before the
flow's first watermark is not read at all, so the fallback does not know its event
times and may record fewer late events than Spark dropped.)
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import IntegerType, LongType, StructField, StructType, TimestampType

from streamsmith.config import Trigger, parse_duration
from streamsmith.io.delta_marks import check_replay
from streamsmith.io.lake import TableFormat, prepare_table, start_foreach_batch, write_batch
from streamsmith.io.sources.base import SourceKind
from streamsmith.io.state_files import read_json_state, write_durably
from streamsmith.monitor import observed
from streamsmith.monitor.progress import LATE_METRIC
from streamsmith.runtime.app import EventTime
from streamsmith.runtime.flow_batches import (
    FlowCover,
    FlowFacts,
    Part,
    await_main_commits,
    watermark_before,
)
from streamsmith.runtime.polling import poll
from streamsmith.runtime.source_logs import offset_log_entry
from streamsmith.transforms.events import may_be_late, too_late
from streamsmith.transforms.quarantine import POSITION, SOURCE_FILE

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
    """The largest event time (µs) seen up to each micro-batch, one small file per batch
    id. Each file holds the largest of its batch and every batch before it, so only the
    last ``keep`` are kept (a restart replays the last batch only): the folder and each
    read stay the same size however many batches ran."""

    def __init__(self, folder: Path, keep: int = 100) -> None:
        self.folder = folder
        self.keep = keep  # as Spark's minBatchesToRetain keeps offsets

    def watermark_before(self, batch_id: int, delay_us: int) -> int | None:
        """Spark's watermark for ``batch_id``: None before any event time was seen."""
        seen = self._largest_before(batch_id)
        return seen - delay_us if seen is not None else None

    def record(self, batch_id: int, max_us: int | None) -> None:
        if max_us is None:
            return
        before = self._largest_before(batch_id)
        self.folder.mkdir(parents=True, exist_ok=True)
        largest = max_us if before is None else max(max_us, before)
        write_durably(self.folder / str(batch_id), str(largest))
        for file in self._files():
            if int(file.name) < batch_id - self.keep:
                file.unlink(missing_ok=True)

    def _files(self) -> list[Path]:
        return [f for f in self.folder.glob("[0-9]*") if f.name.isdigit()]

    def _largest_before(self, batch_id: int) -> int | None:
        remedy = "remove it (the late split then leaves that batch's event times out)"
        files = [file for file in self._files() if int(file.name) < batch_id]
        seen = [int(read_json_state(file, remedy)) for file in files]
        return max(seen) if seen else None


def create_late_table(events: DataFrame, path: Path, table_format: TableFormat) -> None:
    """Create the late-events table of ``events`` at ``path``, empty, unless it exists."""
    schema = late_schema(events.drop(SOURCE_FILE, POSITION).schema)
    prepare_table(events.sparkSession, path, schema, (BATCH_COLUMN,), table_format)


def start_late_stream(
    events: DataFrame,
    rule: EventTime,
    *,
    name: str,
    path: Path,
    checkpoint: Path,
    trigger: Trigger,
    flow_checkpoint: Path | None = None,
    flow_alive: Callable[[], bool] | None = None,
    source: SourceKind | None = None,
    facts: FlowFacts | None = None,
    table_format: TableFormat = "delta",
    app_id: str,
) -> StreamingQuery:
    """Start the companion query writing ``events`` dropped by ``rule`` to ``path``
    (a table of ``table_format``, its batches marked as ``app_id``'s).

    With ``flow_checkpoint`` (the flow's own query) and the kind of its one ``source``,
    each event gets the watermark of the flow's batch that read it
    (``streamsmith.runtime.flow_batches``); with several sources, the batch's watermark
    comes from the flow's batch that read up to the same offsets
    (:func:`flow_late_watermark`). With ``facts`` (the flow's observed metrics), a batch
    whose events were all on time in the flow's batches is not read at all.
    """
    if source is None:
        events = events.drop(SOURCE_FILE, POSITION)
    create_late_table(events, path, table_format)
    max_times = MaxEventTimes(checkpoint / MAX_TIMES_DIR)
    delay_us = int(parse_duration(rule.lateness) * 1_000_000)
    alive = flow_alive or (lambda: True)
    cover = (
        FlowCover(source, flow_checkpoint, checkpoint, alive=alive)
        if source is not None and flow_checkpoint is not None
        else None
    )

    def watermarks(batch_id: int) -> dict[int | None, list[Part] | None] | None:
        """The batch's watermarks, each with the parts of its input it applies to (None:
        all of it); None when the flow's query did not read the same input."""
        if flow_checkpoint is None:
            return None
        if cover is not None:
            parts = cover.parts(batch_id)
            if parts is None:
                return None
            groups: dict[int | None, list[Part]] = {}
            for part in parts:
                groups.setdefault(cover.watermark_before(part.batch), []).append(part)
            return dict(groups)
        found, watermark = flow_late_watermark(flow_checkpoint, checkpoint, batch_id, alive=alive)
        return {watermark: None} if found else None

    def write(batch: DataFrame, batch_id: int) -> None:
        groups = watermarks(batch_id)
        found = groups is not None
        if groups is None:
            groups = {max_times.watermark_before(batch_id, delay_us): None}
        known = {mark: parts for mark, parts in groups.items() if mark is not None}
        if known and found and facts is not None and _all_on_time(known, facts, rule):
            known = {}  # the flow saw every event of these batches in time: nothing to read
        # One pass over the batch: the newest event time is observed while the late
        # events are filtered and written (no cache of the whole batch, no second read).
        newest = Observation(f"{name}-newest-{batch_id}")
        watched = batch.observe(newest, F.max(F.unix_micros(F.col(rule.column))).alias("us"))
        dropped = 0
        if known:
            watermark = _watermark_column(known, whole=None not in groups)
            late = too_late(watched, rule.column, watermark, rule.window, rule.slide).select(
                "*", F.timestamp_micros(watermark).alias("watermark")
            )
            late = late.withColumn("windows_dropped", F.col("windows_dropped").cast("int"))
            late = late.withColumn(BATCH_COLUMN, F.lit(batch_id).cast("long"))
            late = late.drop(SOURCE_FILE, POSITION)
            if table_format == "parquet":
                # Files moved in whole, named after the batch (no empty partition appears
                # and vanishes under a reader); a replay replaces them, or the partition an
                # earlier version wrote.
                shutil.rmtree(path / f"{BATCH_COLUMN}={batch_id}", ignore_errors=True)
            dropped = write_batch(late, path, batch_id, (BATCH_COLUMN,), app_id=app_id)
        elif not found:  # the fallback needs this batch's newest time for later ones
            watched.select(rule.column).write.format("noop").mode("overwrite").save()
        # else: nothing can be late (no watermark yet, or the flow saw only on-time
        # events), and the flow's own logs give the watermarks of the batches to come:
        # this batch is not read at all.
        if known or not found:
            max_times.record(batch_id, newest.get.get("us"))
        observed.note(name, batch_id, LATE_METRIC, dropped)

    check_replay(path, app_id, checkpoint)
    return start_foreach_batch(events, write, name=name, checkpoint=checkpoint, trigger=trigger)


def _all_on_time(groups: dict[int, list[Part] | None], facts: FlowFacts, rule: EventTime) -> bool:
    """Whether the flow's batches that read this input saw no event late for their
    watermark: its oldest accepted event was on time (known only for parts)."""
    if any(members is None for members in groups.values()):
        return False  # a watermark for the whole batch: no parts to look up
    parts = [(mark, part) for mark, members in groups.items() for part in members or []]
    seen = facts.of(sorted({part.batch for _, part in parts}))
    if seen is None:
        return False
    for mark, part in parts:
        oldest = seen[part.batch].oldest_us
        if oldest is not None and may_be_late(oldest, mark, rule.window, rule.slide):
            return False
    return True


def _watermark_column(groups: dict[int, list[Part] | None], *, whole: bool = True) -> Column:
    """Per event, the watermark (µs) its input was read with: one for all, or per part;
    null (nothing late) for input of the flow's batches before its first watermark,
    which a side batch may span too when it is not ``whole``ly under these watermarks."""
    if len(groups) == 1 and whole:
        return F.lit(next(iter(groups)))
    column: Column | None = None
    for watermark, parts in groups.items():
        assert parts is not None, "several watermarks come with their parts"
        read = F.lit(False)
        for part in parts:
            read = read | part.rows()
        column = F.when(read, watermark) if column is None else column.when(read, watermark)
    assert column is not None
    return column


def late_possible(flow_checkpoint: Path) -> bool:
    """Whether any batch of the flow's query has read input under a watermark: only
    then can Spark have dropped an event as late. A flow's first catch-up, read in one
    batch, never has: its late-events query is then not started (``runtime.supervisor``),
    and one started by a later run skips that input, read before the first watermark
    (``_watermark_column``). True when the log no longer says (its early batches gone)."""
    folder = flow_checkpoint / "offsets"
    batches = sorted(int(f.name) for f in folder.glob("[0-9]*") if f.name.isdigit())
    entries = {batch: offset_log_entry(folder / str(batch)) for batch in batches}
    for batch in batches:
        entry, before = entries[batch], entries.get(batch - 1)
        if batch == 0:
            continue
        if entry is None or before is None:
            return True  # being written, or its predecessor's log is gone: cannot tell
        read_input = entry[1] != before[1]
        if read_input and max(entry[0], before[0]) > 0:
            return True
    return False


def flow_late_watermark(
    flow_checkpoint: Path,
    own_checkpoint: Path,
    batch_id: int,
    wait_s: float = 60.0,
    alive: Callable[[], bool] = lambda: True,
) -> tuple[bool, int | None]:
    """Whether the flow's query read this batch's input, and the watermark (µs, None
    before the first) it drops that input's late events with; for flows reading several
    sources, whose batches can only be matched whole.

    Since Spark 3.4 a stateful operator drops late input with the watermark of the
    *previous* micro-batch (data or no-data batch), so the same events can be dropped or
    kept depending on whether Spark ran a no-data batch in between. The exact value is in
    the flow query's offset log: find its batch that read up to the same source offsets
    as this batch (the first one: no-data batches repeat the offsets) and take the
    watermark of the batch before it. Waits up to ``wait_s`` for the flow's query to plan
    that batch; not found when the two queries cut the input differently. A batch found
    is waited for until the flow's query commits it (``alive``: while it runs), as
    :meth:`FlowCover.parts` does.
    """
    own = offset_log_entry(own_checkpoint / "offsets" / str(batch_id))
    if own is None:
        return False, None

    def first_match() -> int | None:
        entries = {
            int(file.name): entry
            for file in (flow_checkpoint / "offsets").glob("[0-9]*")
            if (entry := offset_log_entry(file)) is not None
        }
        return min((i for i, e in entries.items() if e[1] == own[1]), default=None)

    match = poll(first_match, wait_s)
    if match is None:
        log.warning(
            "late events of batch %s: the flow query %s never read the same input; "
            "using the watermark of earlier batches instead",
            batch_id,
            flow_checkpoint,
        )
        return False, None
    side = f"late batch {batch_id} of {own_checkpoint}"
    await_main_commits(flow_checkpoint, [match], alive, side, wait_s=600.0)
    return True, watermark_before(flow_checkpoint, match)


def describe_rule(rule: EventTime) -> str:
    """One line for ``dry-run``."""
    windows = (
        f", windows {rule.window}" + (f" sliding {rule.slide}" if rule.slide else "")
        if rule.window
        else ""
    )
    return f"{rule.column} watermark {rule.lateness}{windows}"
