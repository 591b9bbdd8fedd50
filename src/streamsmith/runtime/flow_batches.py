"""Which of a flow's main-query batches read a side query's input, and what they found.

A flow's quarantine and late-events queries (its *side* queries) read the flow's source
again, on their own schedule, so their micro-batches need not line up with the main
query's. Every piece of input was still read by exactly one main-query batch: for a file
source, the first batch whose end (a log id in the file source's log) reaches the file's
log id; for Kafka, the first batch whose end offset is past the record's offset. Spark
keeps both logs in the checkpoints, so :class:`FlowCover` finds, for a side batch, the
main-query batches that read its input, each with its part of it.

The main query also observes, in the pass it makes anyway (:func:`observe_flow`), how
many rows it rejected and the oldest accepted event time of each batch, and, over file
sources, the rejected rows themselves when they are few (up to ``CARRY_ROWS`` rows of up
to ``CARRY_CHARS`` characters of raw payload: a bounded top-k aggregate, so a batch of
garbage costs the driver no more than that). :class:`FlowFacts` reads those from the
main query's progress when it runs in this process. With them, a side query can skip a
batch outright: the quarantine query when the main query rejected nothing there, or
write the rows the main query carried without reading its input again; the late-events
query when even the oldest event was on time. When a fact is missing (the main query
runs elsewhere, or ran those batches before a restart), the side query reads its batch:
skipping is never a guess.

A side batch never commits ahead of the main query (:meth:`FlowCover.parts`): it waits
until the main-query batches that read its input have committed, and fails, left
uncommitted, when the main query stops first. A main batch that failed (a record its
merge refused, say) is thus recomputed by both queries when the flow runs again, under
the spec of that run, and ``read = written + quarantined + dropped + late`` holds after
any failure and restart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from streamsmith.errors import UserError
from streamsmith.io.sources.base import SourceKind
from streamsmith.monitor.progress import (
    CARRIED_REJECTS,
    FLOW_METRIC,
    LATENCY_MAX,
    LATENCY_QUANTILES,
    LATENCY_QUANTILES_MS,
    RECORDS_READ,
)
from streamsmith.runtime.polling import poll
from streamsmith.runtime.source_logs import (
    FileSourceLog,
    kafka_offsets,
    normal_path_column,
    offset_log_entry,
)
from streamsmith.transforms.quarantine import (
    POSITION,
    RAW,
    REASON_DETAIL,
    REJECT_REASON,
    SOURCE_FILE,
    SOURCE_MS,
    deferred_raw,
)

log = logging.getLogger(__name__)

KafkaRange = tuple[str, int, int | None, int]  # topic, partition, first (None: any), end
# A batch's rejected rows travel in its progress report when they are at most this many,
# each with at most this much raw payload: about 2 MB per report at most, of which Spark
# keeps the last 100 (0.2 of the driver's 2 GB in the worst case).
CARRY_ROWS = 2_000
CARRY_CHARS = 1_024
CARRIED_COLUMNS = (REJECT_REASON, SOURCE_FILE, POSITION, RAW, REASON_DETAIL)  # as strings


def observe_flow(
    tagged: DataFrame, event_time: str | None = None, *, carry_rejects: bool = False
) -> DataFrame:
    """``tagged`` reporting, per micro-batch, its rejected rows (``rows``) and, with
    ``event_time``, the oldest accepted event time in µs (``oldest_us``, null when none
    was accepted), as the observed metric ``FLOW_METRIC``; with ``carry_rejects``, also
    the rejected rows themselves (``CARRIED_COLUMNS`` as strings) when every one fits the
    ``CARRY_*`` bounds, else null."""
    if REJECT_REASON not in tagged.columns:
        return tagged
    rejected = F.col(REJECT_REASON).isNotNull()
    # count() of the reason, not count_if(): the same number, without the shared
    # expression (and plan node) Spark rewrites count_if into at every batch's planning.
    metrics = [F.count(REJECT_REASON).alias("rows"), F.count(F.lit(1)).alias(RECORDS_READ)]
    waited = None
    if SOURCE_MS in tagged.columns:  # a Kafka source: how long records waited to be read
        # A column first: Spark observes only deterministic expressions of a row.
        waited = "_waited_ms"
        tagged = tagged.withColumn(waited, F.expr(_ROW_CLOCK_MS) - F.col(SOURCE_MS))
        metrics += latency_metrics(F.col(waited))
    if event_time is not None:
        oldest = F.min(F.when(~rejected, F.unix_micros(F.col(event_time))))
        metrics.append(oldest.alias("oldest_us"))
    raw = deferred_raw(tagged) if carry_rejects else None
    if raw is not None:
        metrics.append(_carried_rows(tagged, rejected, raw).alias(CARRIED_REJECTS))
    observed = tagged.observe(FLOW_METRIC, *metrics)
    return observed.drop(waited) if waited else observed


# The clock of the task processing a row, read per row (Spark folds current_timestamp()
# to the batch's start): a real-time query processes each record as it arrives.
_ROW_CLOCK_MS = "CAST(reflect('java.lang.System', 'currentTimeMillis') AS BIGINT)"


def latency_metrics(waited: Column) -> list[Column]:
    """Per batch, the median and 99th percentile (``LATENCY_QUANTILES_MS``) and the
    maximum of ``waited``, the time from each record's Kafka timestamp to its processing
    in ms (read by ``monitor.progress.latency``)."""
    # One aggregate for both quantiles: Spark keeps a sketch per aggregate it observes,
    # and would fill two for two fields of one.
    return [
        F.percentile_approx(waited, list(LATENCY_QUANTILES), 1000).alias(LATENCY_QUANTILES_MS),
        F.max(waited).alias(LATENCY_MAX),
    ]


def _carried_rows(tagged: DataFrame, rejected: Column, payload: Column) -> Column:
    """The batch's rejected rows, when all fit the bounds; else null. ``max_by`` with a
    count keeps at most ``CARRY_ROWS`` per task and merge, whatever the batch holds; the
    raw ``payload`` is computed only for rejected rows (a ``CASE`` evaluates lazily)."""
    raw = F.make_valid_utf8(payload.cast("string"))
    fits = rejected & (F.length(raw) <= CARRY_CHARS)
    present = [name for name in CARRIED_COLUMNS if name in tagged.columns]
    values = [raw if name == RAW else F.col(name).cast("string") for name in present]
    row = F.struct(*[value.alias(name) for value, name in zip(values, present, strict=True)])
    kept = F.max_by(F.when(fits, row), F.when(fits, F.lit(0)), CARRY_ROWS)
    every = (F.count_if(rejected) <= CARRY_ROWS) & (F.count_if(fits) == F.count_if(rejected))
    return F.when(every, kept)


@dataclass(frozen=True)
class Part:
    """The part of a side batch's input that one main-query batch read."""

    batch: int
    files: tuple[str, ...] = ()
    ranges: tuple[KafkaRange, ...] = ()

    def rows(self) -> Column:
        """Whether a row (with the source's lineage columns) is in this part."""
        if not self.ranges:
            return normal_path_column(F.col(SOURCE_FILE)).isin(list(self.files))
        condition = F.lit(False)
        offset = F.col(POSITION).cast("long")
        for topic, partition, first, end in self.ranges:
            here = (F.col(SOURCE_FILE) == F.lit(f"kafka://{topic}/{partition}")) & (offset < end)
            if first is not None:
                here = here & (offset >= first)
            condition = condition | here
        return condition


class _Never:
    """The main query's logs no longer say which of its batches read this input."""


NEVER = _Never()
Cover = list[Part] | None | _Never  # None: the main query has not planned it yet


class MainQueryBehind(UserError):
    """A side batch's input was not committed by the flow's main query: the side batch
    fails, uncommitted, so that it is recomputed with the main query's retry."""


def last_commit(checkpoint: Path) -> int | None:
    """The id of the last batch a query committed (its commit log), None before any."""
    ids = [int(f.name) for f in (checkpoint / "commits").glob("[0-9]*") if f.name.isdigit()]
    return max(ids, default=None)


def last_planned(checkpoint: Path) -> int | None:
    """The id of the last batch a query planned (its offset log), None before any."""
    ids = [int(f.name) for f in (checkpoint / "offsets").glob("[0-9]*") if f.name.isdigit()]
    return max(ids, default=None)


def uncommitted_batch(checkpoint: Path) -> int | None:
    """The batch a query planned and has not committed (its restart runs it again)."""
    planned, done = last_planned(checkpoint), last_commit(checkpoint)
    if planned is None or (done is not None and done >= planned):
        return None
    return planned


def recomputed_after_main(flow: Path, own: Path) -> str | None:
    """One line when a side query (checkpoint ``own``) has a batch planned but not
    committed while its main query (``flow``) has committed all it planned: the main
    query committed that input (the run stopped between the two commits), and the side
    query computes it again under the spec it runs with now. A spec change that rejects
    or drops other records then breaks ``read = written + quarantined + late`` for it;
    when both have the batch uncommitted, both compute it again alike."""
    planned = uncommitted_batch(own)
    if planned is None:
        return None
    main_planned, main_done = last_planned(flow), last_commit(flow)
    if main_planned is None or main_done is None or main_done < main_planned:
        return None
    return (
        f"its batch {planned} is computed again under this spec, after the flow committed "
        "that input under the last one: if the change rejects or drops other records, "
        "read = written + quarantined + late will not hold for that batch"
    )


def await_main_commits(
    flow: Path, batches: Sequence[int], alive: Callable[[], bool], side: str, wait_s: float
) -> None:
    """Return once the main query (checkpoint ``flow``) has committed every one of
    ``batches``; raise :class:`MainQueryBehind` when it stops (``alive`` False) or
    ``wait_s`` passes first. Commits come in order, so the last one says."""
    if not batches:
        return
    needed = max(batches)

    def check() -> bool | None:
        done = last_commit(flow)
        if done is not None and done >= needed:
            return True
        return None if alive() else False

    if poll(check, wait_s) is not True:
        raise MainQueryBehind(
            f"{side}: the flow's batch {needed} ({flow}) has not committed, so this side "
            "batch is left uncommitted and is computed again when the flow runs again"
        )


def _always() -> bool:
    return True


def running_here(spark: SparkSession, query_name: str) -> Callable[[], bool]:
    """Whether the query named ``query_name`` runs in this process now (a restart of it
    runs under the same name)."""
    return lambda: any(query.name == query_name for query in spark.streams.active)


@dataclass
class FlowCover:
    """Matches a side query's batches (checkpoint ``own``) to the main query's batches
    (checkpoint ``flow``) over one file or Kafka source; ``alive`` says whether the main
    query still runs (in this process)."""

    kind: SourceKind
    flow: Path
    own: Path
    alive: Callable[[], bool] = _always
    wait_s: float = 600.0
    _flow_files: FileSourceLog = field(init=False)
    _own_files: FileSourceLog = field(init=False)

    def __post_init__(self) -> None:
        self._flow_files = FileSourceLog(self.flow)
        self._own_files = FileSourceLog(self.own)

    def parts(self, batch_id: int) -> list[Part] | None:
        """The main query's batches that read side batch ``batch_id``, each with its part,
        once the main query has committed them; None when its logs no longer say (it
        read that input long ago). Raises :class:`MainQueryBehind` when the main query
        stops, or ``wait_s`` passes, before it has planned and committed them: a side
        batch never commits what its main query has not."""
        side = f"side batch {batch_id} of {self.own}"

        def planned() -> Cover | bool:
            found = self._cover(batch_id)
            return found if found is not None or self.alive() else False

        found = poll(planned, self.wait_s)
        if isinstance(found, list):
            await_main_commits(
                self.flow, [part.batch for part in found], self.alive, side, self.wait_s
            )
            return found
        if found is NEVER:
            log.warning(
                "%s: the logs of %s no longer say which batch read its input", side, self.flow
            )
            return None
        raise MainQueryBehind(
            f"{side}: the flow's query ({self.flow}) has not read its input, so this side "
            "batch is left uncommitted and is computed again when the flow runs again"
        )

    def watermark_before(self, batch: int) -> int | None:
        """The watermark (µs, None before the first) the main query's batch ``batch``
        drops late input with: since Spark 3.4 the one recorded with the batch before."""
        return watermark_before(self.flow, batch)

    def _cover(self, batch_id: int) -> Cover:
        if self.kind == "files":
            files = self._own_files.batch_files(batch_id)
            if files is None:
                return NEVER
            cover = file_cover(self._flow_files, files)
            start = self._own_files.log_offset(batch_id - 1) if batch_id > 0 else None
            if isinstance(cover, list) and start is not None:
                self._own_files.forget_through(start)  # side batches come in order
            return cover
        own_end = kafka_offsets(self.own, batch_id)
        if own_end is None:
            return NEVER
        own_start = kafka_offsets(self.own, batch_id - 1) if batch_id > 0 else None
        return kafka_cover(self.flow, own_start, own_end)


def watermark_before(checkpoint: Path, batch: int) -> int | None:
    """The watermark (µs, None before the first) a query's batch ``batch`` drops late
    input with: the one recorded in the offset log with the batch before it."""
    entry = offset_log_entry(checkpoint / "offsets" / str(batch - 1)) if batch > 0 else None
    watermark_ms = entry[0] if entry is not None else 0
    return watermark_ms * 1000 if watermark_ms > 0 else None


def file_cover(flow: FileSourceLog, files: Sequence[str]) -> Cover:
    """Which of the main query's batches read each of ``files``."""
    ids = flow.ids()
    ends = flow.batch_ends()
    readers: dict[int, list[str]] = {}
    for file in files:
        log_id = ids.get(file)
        if log_id is None:
            return None  # not listed by the main query yet
        # The first batch ending at or after the file's log id read it (no-data batches
        # after it repeat its end), if the batch before it still says where it ended.
        reader = next((batch for batch, end in ends if end >= log_id), None)
        if reader is None:
            return None
        before = flow.log_offset(reader - 1) if reader > 0 else -1
        if before is None or before >= log_id:
            return NEVER
        readers.setdefault(reader, []).append(file)
    return [Part(batch, files=tuple(found)) for batch, found in sorted(readers.items())]


def kafka_cover(
    flow: Path, start: dict[tuple[str, int], int] | None, end: dict[tuple[str, int], int]
) -> Cover:
    """Which of the main query's batches read ``[start, end)`` of each topic-partition
    (``start`` None: everything before ``end``, for a side query's first batch, whose
    start Spark does not log)."""
    batches = _kafka_batches(flow)
    if not batches:
        return None
    first_known = batches[0][0]
    parts: dict[int, list[KafkaRange]] = {}
    for (topic, partition), stop in sorted(end.items()):
        low = None if start is None else start.get((topic, partition))
        if low is not None and low >= stop:
            continue
        if batches[-1][1].get((topic, partition), 0) < stop:
            return None  # the main query has not read that far yet
        previous: int | None = None
        for index, (batch, ends) in enumerate(batches):
            reach = ends.get((topic, partition), 0)
            # Where the batch began; unknown for the oldest batch still logged (unless
            # it is the first), whose reads may begin at any earlier offset.
            begin = previous if index > 0 else (None if batch == 0 else reach)
            previous = reach
            if begin is not None and begin >= reach:
                continue  # read nothing of this partition
            lo = begin if low is None else (low if begin is None else max(low, begin))
            hi = min(stop, reach)
            if hi <= 0 or (lo is not None and lo >= hi):
                continue
            parts.setdefault(batch, []).append((topic, partition, lo, hi))
        if first_known > 0 and (low is None or low < batches[0][1].get((topic, partition), 0)):
            return NEVER  # some of it was read by a batch whose log is gone
    return [Part(batch, ranges=tuple(found)) for batch, found in sorted(parts.items())]


def _kafka_batches(flow: Path) -> list[tuple[int, dict[tuple[str, int], int]]]:
    """(batch id, end offsets) of each batch in the main query's offset log, in order."""
    found = []
    for file in (flow / "offsets").glob("[0-9]*"):
        ends = kafka_offsets(flow, int(file.name))
        if ends is not None:
            found.append((int(file.name), ends))
    return sorted(found, key=lambda pair: pair[0])


@dataclass(frozen=True)
class Facts:
    """What the main query observed in one batch."""

    rejected: int
    oldest_us: int | None  # the oldest accepted event time; None when none was accepted
    # Every rejected row (``CARRIED_COLUMNS``, by name); None when not carried.
    rejects: tuple[Mapping[str, str | None], ...] | None = None


@dataclass
class FlowFacts:
    """The observed metrics of the main query ``query_name``'s batches, from its progress
    in this process (Spark keeps a query's last 100 progress reports; this keeps what it
    saw of them).

    A report is trusted only when its batch read input (``numInputRows`` > 0). Spark's
    file sink skips a batch it already committed before a crash (the process died
    between the sink's log and the query's commit log) without running its plan, and
    still reports the observed metrics, as zeros: a side query that believed them would
    skip input holding rejects or late events (found by the chaos run). An idle query's
    report (no input, no metrics) names the next batch, which has not run yet, so a later
    report of that batch replaces it. The main query last seen running is kept: a
    catch-up's main query may end before a side query asks for its last batches, whose
    reports it still holds. The facts of batches before those a side query last asked
    for are dropped: it reads on, and a replay that asks again reads its input itself.
    Kept, they held each batch's rejected rows for 10,000 batches, and the driver of the
    long run of ``benchmarks/cost_over_time.py`` grew by them, a quarter of a megabyte a
    minute.
    """

    spark: SparkSession
    query_name: str
    wait_s: float = 600.0
    _seen: dict[int, Facts | None] = field(default_factory=dict)  # None: not known
    _idle: set[int] = field(default_factory=set)  # named only by idle reports so far
    _last_report: tuple[int, str] | None = None
    _last_query: StreamingQuery | None = None
    _floor: int = 0  # the first batch still wanted: the earliest of the last asked for

    def __post_init__(self) -> None:
        self._query()  # the main query starts first: remember it

    def of(self, batches: Sequence[int]) -> dict[int, Facts] | None:
        """Facts of every batch in ``batches``; None when one is unknown. Waits (up to
        ``wait_s``) while the main query runs here and has yet to finish one of them."""
        found = poll(lambda: self._lookup(batches), self.wait_s)
        if found is None:
            log.debug("%s: batches %s unknown after %.0f s", self.query_name, batches, self.wait_s)
        if batches:
            self._forget_before(min(batches))
        return found if isinstance(found, dict) else None

    def _forget_before(self, batch: int) -> None:
        """Drop the facts of the batches before ``batch``, and take none of them again."""
        self._floor = max(self._floor, batch)
        for old in [b for b in self._seen if b < self._floor]:
            del self._seen[old]
            self._idle.discard(old)

    def _lookup(self, batches: Sequence[int]) -> dict[int, Facts] | Literal[False] | None:
        """The facts of ``batches``; False when they cannot be known here, None when the
        main query has yet to finish one of them."""
        query = self._query()
        running = query is not None and query.isActive  # before its last reports are read
        if query is not None:
            self._collect(query)
        newest = max(self._seen, default=None)
        waiting = [b for b in batches if b not in self._seen or (b in self._idle and b == newest)]
        if not waiting:
            found = {batch: self._seen[batch] for batch in batches}
            if None in found.values():
                log.debug("%s: no trusted report of batches %s", self.query_name, batches)
                return False
            return {batch: facts for batch, facts in found.items() if facts is not None}
        if not running or self._passed(waiting):
            log.debug(
                "%s: batches %s unknown (%s)",
                self.query_name,
                waiting,
                "not running here" if not running else "their report is gone",
            )
            return False
        return None

    def _query(self) -> StreamingQuery | None:
        """The main query running in this process, else the one last seen running."""
        active = (q for q in self.spark.streams.active if q.name == self.query_name)
        self._last_query = next(active, self._last_query)
        return self._last_query

    def _collect(self, query: StreamingQuery) -> None:
        last = query.lastProgress  # one report: the list costs tens of ms (JSON each)
        if last is None or (int(last.batchId), str(last.timestamp)) == self._last_report:
            return  # nothing new since the last look
        self._last_report = (int(last.batchId), str(last.timestamp))
        batch, newest = int(last.batchId), max(self._seen, default=None)
        # The whole list only when a report may have been missed since the last look
        # (each report may carry a batch's rejected rows: reading 100 can cost seconds).
        missed = newest is None or batch > newest + 1 or (newest in self._idle and batch != newest)
        for progress in query.recentProgress if missed else [last]:
            batch = int(progress.batchId)
            if batch < self._floor or (batch in self._seen and batch not in self._idle):
                continue
            said = reported_facts(int(progress.numInputRows or 0), progress.observedMetrics)
            if said == IDLE:
                self._seen.setdefault(batch, None)
                self._idle.add(batch)
                continue
            self._idle.discard(batch)
            self._seen[batch] = said
        if len(self._seen) > 10_000:
            for old in sorted(self._seen)[:5_000]:
                del self._seen[old]
                self._idle.discard(old)

    def _passed(self, batches: Sequence[int]) -> bool:
        """Whether a batch is older than any progress seen, or than those forgotten: its
        report is gone."""
        first = min(batches)
        return first < self._floor or (bool(self._seen) and first < min(self._seen))


IDLE: Literal["idle"] = "idle"


def reported_facts(input_rows: int, observed: Mapping[str, Any]) -> Facts | Literal["idle"] | None:
    """What one progress report of the main query says of its batch: the batch's facts;
    None when it does not say (no metric; or no input read, as when Spark's file sink
    skips a batch it had committed before a crash and reports zeroed metrics); ``IDLE``
    for an idle query's report (no input, no metrics), which names the next batch before
    that batch runs."""
    if input_rows > 0:
        return _facts(observed)
    return IDLE if not observed else None


def _facts(observed: Mapping[str, Any]) -> Facts | None:
    row = observed.get(FLOW_METRIC)
    if row is None:
        return None
    values = _as_dict(row)
    oldest = values.get("oldest_us")
    rejected = int(values.get("rows") or 0)
    carried = values.get(CARRIED_REJECTS)
    rejects = None
    if carried is not None and len(carried) == rejected:
        rejects = tuple(_as_dict(each) for each in carried)
    return Facts(rejected, None if oldest is None else int(oldest), rejects)


def _as_dict(row: Any) -> dict[str, Any]:
    """A metric's row as a dict: a ``Row`` in a live progress, a dict once read from JSON."""
    return dict(row.asDict() if hasattr(row, "asDict") else row)
