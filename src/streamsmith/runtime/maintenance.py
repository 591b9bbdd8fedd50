"""The spec's ``maintenance``: ``OPTIMIZE`` and ``VACUUM`` of a pipeline's Delta tables,
when the spec says (a cron, or after each catch-up run of the flow), recorded in the
event log.

Vacuum never deletes a file a reader of the table still needs:

- a time-travel read of a version committed within ``retain``: vacuum deletes only files
  that versions removed longer than ``retain`` ago, and twice ``retain`` is written into
  the table as ``delta.deletedFileRetentionDuration``, so Delta itself refuses any
  shorter VACUUM by another client (Spark's, delta-rs'), and the log keeps the records
  of removed files, through which vacuum finds them, until the next vacuum
  (``io.delta_maintenance.tombstone_hours``);
- a stream reading the table: every checkpoint under the storage root whose offsets name
  the table (by its Delta id) holds the last version that stream committed; vacuum keeps
  every file of that version and later ones, however old, so a stream stopped for longer
  than ``retain`` still finds the files it has not read. The plan also refuses a
  ``retain`` shorter than the time between two runs of a scheduled flow reading the table
  as a stream, which would have every run of that flow hold files back.

Each operation is one event: ``maintenance`` (table, operation, files removed and added,
the version it committed, its duration) or ``maintenance_failed`` (with the reason).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from streamsmith.config import AFTER_RUN, MaintenanceSpec, PipelineSpec
from streamsmith.errors import UserError
from streamsmith.io import delta_maintenance
from streamsmith.io.lake_paths import CHECKPOINTS_DIR, is_delta
from streamsmith.monitor.recorder import first_line

log = logging.getLogger(__name__)

Operation = Literal["optimize", "expire", "vacuum"]
# Expiry before vacuum: the files it removes are then vacuumed once ``retain`` has passed.
OPERATIONS: tuple[Operation, ...] = ("optimize", "expire", "vacuum")
REJECTED_ROLES = ("quarantine", "late")  # the tables whose rows keep_rejected expires
Record = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class TableMaintenance:
    """The maintenance of one Delta table of a flow: when each operation runs (a cron,
    ``after_run``, or None: never), its retention in hours and OPTIMIZE's file size."""

    table: str
    path: Path
    flow: str
    query: str  # the flow's main query: where ``status`` shows the table's maintenance
    optimize: str | None
    vacuum: str | None
    retain_hours: int
    target_file_mb: int | None = None
    expire_hours: int | None = None  # a quarantine or late table: rows older are deleted
    log_retain_hours: int | None = None  # the Delta log's retention (None: Delta's own)

    def when(self, operation: Operation) -> str | None:
        if operation == "expire":  # with vacuum, when rows expire at all
            return self.vacuum if self.expire_hours is not None else None
        return self.optimize if operation == "optimize" else self.vacuum

    def operations(self, when: str | None = None) -> tuple[Operation, ...]:
        """The operations declared (at ``when`` only, when given)."""
        return tuple(
            op for op in OPERATIONS if self.when(op) and (when is None or self.when(op) == when)
        )


def flow_maintenance(spec: PipelineSpec, flow: str) -> tuple[MaintenanceSpec | None, str]:
    """The maintenance of ``flow``'s tables: the flow's keys over the pipeline's (None:
    none), and the spec key its ``retain`` comes from, for messages."""
    base, own = spec.maintenance, spec.flows[flow].maintenance
    if own is None:
        return base, "maintenance.retain"
    given = {key: getattr(own, key) for key in own.model_fields_set}
    merged = base.model_copy(update=given) if base is not None else own
    key = f"flows.{flow}.maintenance.retain" if "retain" in given or base is None else ""
    return merged, key or "maintenance.retain"


def plan_tables(
    spec: PipelineSpec,
    flow: str,
    query: str,
    tables: Sequence[tuple[str, Path, str, str]],
    terminates: bool,
) -> tuple[TableMaintenance, ...]:
    """The maintenance of ``flow``'s lake tables ((name, path, format, role) each),
    checked against the flow: a flow's own block needs Delta tables, ``after_run`` needs
    a flow that runs as catch-ups (``terminates``), and ``keep_rejected`` a vacuum."""
    merged, _ = flow_maintenance(spec, flow)
    if merged is None or not (merged.optimize or merged.vacuum or merged.keep_rejected):
        return ()
    own = spec.flows[flow].maintenance
    at = ("flows", flow, "maintenance") if own is not None else ("maintenance",)
    where = f"{'.'.join(at)} (in {spec.origin_of(at)})"
    if merged.keep_rejected and not merged.vacuum:
        raise UserError(
            f"{where}: keep_rejected deletes old quarantine and late rows when vacuum runs: "
            'set vacuum too (a cron such as "0 3 * * *", or after_run)'
        )
    if merged.log_retain_hours is not None and merged.log_retain_hours < merged.retain_hours:
        at = (
            ("flows", flow, "maintenance")
            if own and "log_retain" in own.model_fields_set
            else ("maintenance",)
        )
        raise UserError(
            f"{'.'.join(at)}.log_retain (in {spec.origin_of(at)}): {merged.log_retain} is "
            f"shorter than retain ({merged.retain}): time travel within retain reads the log "
            "of those versions"
        )
    delta = [(name, path, role) for name, path, table_format, role in tables
             if table_format == "delta"]  # fmt: skip
    if own is not None and not delta:
        raise UserError(
            f"{where}: OPTIMIZE and VACUUM are Delta operations, and flow {flow!r} writes "
            "no Delta table: remove the key or set its sink's format: delta"
        )
    for operation in ("optimize", "vacuum"):  # expire runs with vacuum
        if getattr(merged, operation) == AFTER_RUN and not terminates and delta:
            raise UserError(
                f"{where}: {operation}: after_run runs after each catch-up run of the "
                f'flow, and flow {flow!r} runs always on: give a cron (e.g. "0 3 * * *")'
            )
    return tuple(
        TableMaintenance(
            table=name,
            path=path,
            flow=flow,
            query=query,
            optimize=merged.optimize,
            vacuum=merged.vacuum,
            retain_hours=merged.retain_hours,
            target_file_mb=merged.target_file_mb,
            expire_hours=merged.keep_rejected_hours if role in REJECTED_ROLES else None,
            log_retain_hours=merged.log_retain_hours,
        )
        for name, path, role in delta
    )


def check_retention(
    spec: PipelineSpec, task: TableMaintenance, reader: str, cron: str | None
) -> None:
    """Refuse a ``retain`` shorter than the time between two runs of flow ``reader``
    (scheduled by ``cron``), which reads ``task``'s table as a stream."""
    if task.vacuum is None or cron is None:
        return
    gap = longest_gap(cron)
    if task.retain_hours * 3600 >= gap:
        return
    _, key = flow_maintenance(spec, task.flow)
    at = tuple(key.split("."))
    raise UserError(
        f"{key} (in {spec.origin_of(at)}): {task.retain_hours} hours is shorter than the "
        f"{_hours_text(gap)} between two runs of flow {reader!r} (schedule {cron!r}), "
        f"which reads table {task.table!r} as a stream: VACUUM would have to keep the "
        f"files of every version that flow has not read yet; set retain to at least "
        f"{_hours_text(gap)}"
    )


# Delta's streaming read options under which a stream goes on past a commit deleting rows.
_PAST_DELETES = ("ignoredeletes", "skipchangecommits")


def check_expiry(spec: PipelineSpec, task: TableMaintenance, reader: str, source: str) -> None:
    """Refuse to expire rows of a table flow ``reader`` reads as a stream (``source``)
    unless that stream goes on past deletes: Delta stops a stream at a commit that removes
    rows, and an expiry is one."""
    if task.expire_hours is None:
        return
    options = {
        key.lower(): str(value).lower() for key, value in spec.sources[source].options.items()
    }
    if any(options.get(name) == "true" for name in _PAST_DELETES):
        return
    _, key = flow_maintenance(spec, task.flow)
    raise UserError(
        f"{key.replace('retain', 'keep_rejected')}: table {task.table!r} loses its old "
        f"rows, and flow {reader!r} reads it as a stream (source {source!r}), which Delta "
        f"stops at such a delete: set sources.{source}.options.ignoreDeletes: true, or "
        "remove keep_rejected"
    )


def longest_gap(cron: str) -> float:
    """The longest time between two due times of ``cron`` over a year (or its first
    thousand due times, which a cron frequent enough to have more repeats within), in
    seconds."""
    from croniter import croniter

    start = datetime(2026, 1, 1, tzinfo=UTC)
    times = croniter(cron, start)
    previous: datetime = times.get_next(datetime)
    longest = 0.0
    for _ in range(1000):
        if previous >= start + timedelta(days=366):
            break
        following: datetime = times.get_next(datetime)
        longest = max(longest, (following - previous).total_seconds())
        previous = following
    return longest


def _hours_text(seconds: float) -> str:
    hours = int(-(-seconds // 3600))
    number, unit = (hours, "hour") if hours % 24 else (hours // 24, "day")
    return f"{number} {unit}" + ("" if number == 1 else "s")


@dataclass(frozen=True)
class StreamPosition:
    """A stream reading a table: its checkpoint and the oldest version it still needs."""

    checkpoint: Path
    version: int


def stream_positions(root: Path, table_id: str) -> list[StreamPosition]:
    """Every query checkpoint under ``root`` reading the Delta table ``table_id``, with
    the first version it still needs: the one its last committed batch's offset names
    (Delta's offset is the version to read on from, or the snapshot being read); before
    its first commit, the one its first batch's offset names."""
    found = []
    for checkpoint in sorted((root / CHECKPOINTS_DIR).glob("*/*")):
        offsets = _log_ids(checkpoint / "offsets")
        if not offsets:
            continue
        committed = _log_ids(checkpoint / "commits")
        batch = max(committed) if committed else min(offsets)
        versions = [
            int(entry["reservoirVersion"])
            for entry in _source_offsets(checkpoint / "offsets" / str(batch))
            if entry.get("reservoirId") == table_id and "reservoirVersion" in entry
        ]
        if versions:
            found.append(StreamPosition(checkpoint, min(versions)))
    return found


def _log_ids(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return [int(entry.name) for entry in folder.iterdir() if entry.name.isdigit()]


def _source_offsets(file: Path) -> Iterable[dict[str, Any]]:
    """The JSON object offsets of an offset-log file (a version line, the batch's
    metadata, then one line per source)."""
    try:
        lines = file.read_text(encoding="utf-8").splitlines()[2:]
    except FileNotFoundError:
        return
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a source whose offset is not JSON: not a Delta table's
        if isinstance(entry, dict):
            yield entry


def maintain(
    task: TableMaintenance,
    operations: Iterable[Operation],
    root: Path,
    record: Record,
    trigger: str,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    """Run ``operations`` on ``task``'s table, each recorded (``trigger`` says why it
    ran: a cron, after_run, or now); returns the events written. A table not written
    yet has nothing to maintain. ``now`` is the clock rows expire by (default: now)."""
    if not is_delta(task.path):
        log.info("table %s is not written yet: nothing to maintain", task.table)
        return []
    written = []
    for operation in operations:
        event = {"table": task.table, "query": task.query, "operation": operation,
                 "trigger": trigger}  # fmt: skip
        started = time.monotonic()
        try:
            done = (
                _optimize(task)
                if operation == "optimize"
                else _expire(task, now or datetime.now(UTC))
                if operation == "expire"
                else _vacuum(task, root)
            )
        except Exception as exc:  # recorded and returned, never silent: callers alert or fail
            reason = first_line(str(exc)) or type(exc).__name__
            message = f"{operation} of table {task.table} failed: {reason}"
            log.warning(message, exc_info=True)
            written.append(record({**event, "event": "maintenance_failed", "message": message}))
            continue
        seconds = round(time.monotonic() - started, 3)
        written.append(record({**event, "event": "maintenance", **done, "duration_s": seconds}))
    return written


def _optimize(task: TableMaintenance) -> dict[str, Any]:
    target = task.target_file_mb * 1024 * 1024 if task.target_file_mb else None
    done = delta_maintenance.compact(task.path, target)
    return {
        "files_removed": done.files_removed,
        "files_added": done.files_added,
        "version": done.version,
        "message": f"{done.files_removed} files compacted into {done.files_added}",
    }


def _expire(task: TableMaintenance, now: datetime) -> dict[str, Any]:
    assert task.expire_hours is not None
    done = delta_maintenance.expire(task.path, task.expire_hours, now)
    message = f"{done.rows} rows older than {task.expire_hours} hours deleted"
    if done.partitions:
        message += f" ({done.partitions} partitions, {done.column} up to {done.upto})"
    return {
        "files_removed": 0,
        "files_added": 0,
        "rows_deleted": done.rows,
        "version": done.version,
        "message": message,
    }


@dataclass(frozen=True)
class VacuumReport:
    """What a vacuum deleted, and which streams reading the table held files back."""

    done: delta_maintenance.Vacuumed
    hours: int
    keep_from: int | None = None
    held_by: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        return f"{len(self.done.files)} files deleted, unused for {self.hours} hours{self.notes}"

    @property
    def notes(self) -> str:
        """What else it deleted, and what it kept for a stream; empty when nothing."""
        counts = (
            (self.done.checksums, "checksum files"),
            (self.done.folders, "empty partition folders"),
        )
        also = ", ".join(f"{count} {what}" for count, what in counts if count)
        text = f" (and {also})" if also else ""
        if self.keep_from is not None:
            names = ", ".join(self.held_by)
            text += f"; kept the files of version {self.keep_from} on, which {names} has not read"
        return text


def vacuum(
    path: Path, root: Path, hours: int, *, dry_run: bool = False, enforce: bool = False
) -> VacuumReport:
    """Vacuum the Delta table at ``path`` at a retention of ``hours``, keeping every file
    of the versions a stream under ``root`` reading the table has not read (see
    :func:`delta_maintenance.vacuum`)."""
    latest = delta_maintenance.latest_version(path)
    streams = stream_positions(root, delta_maintenance.table_id(path))
    behind = [stream for stream in streams if stream.version <= latest]
    keep_from = min((stream.version for stream in behind), default=None)
    done = delta_maintenance.vacuum(path, hours, keep_from, dry_run=dry_run, enforce=enforce)
    held_by = tuple(
        f"{s.checkpoint.parent.name}.{s.checkpoint.name}" for s in behind if s.version == keep_from
    )
    return VacuumReport(done, hours, keep_from, held_by)


def _vacuum(task: TableMaintenance, root: Path) -> dict[str, Any]:
    declared = delta_maintenance.declare_retention(
        task.path, task.retain_hours, task.log_retain_hours
    )
    report = vacuum(task.path, root, task.retain_hours)
    checksums = delta_maintenance.prune_checksums(task.path)
    return {
        "files_removed": len(report.done.files),
        "files_added": 0,
        "retain_hours": task.retain_hours,
        "file_checksums_removed": report.done.checksums,
        "folders_removed": report.done.folders,
        "kept_from_version": report.keep_from,
        "log_checksums_removed": checksums,
        "properties_set": declared,
        "message": report.message,
    }


def run_after(
    tasks: Iterable[TableMaintenance], root: Path, record: Record
) -> list[dict[str, Any]]:
    """The ``after_run`` operations of ``tasks`` (their flows' catch-up run ended)."""
    return [
        event
        for task in tasks
        for event in maintain(task, task.operations(AFTER_RUN), root, record, AFTER_RUN)
    ]


def failed(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """The messages of the failed operations among ``events``."""
    return [str(e.get("message")) for e in events if e.get("event") == "maintenance_failed"]
