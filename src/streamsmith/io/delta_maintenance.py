"""``OPTIMIZE``, ``VACUUM`` and the expiry of old rows of a lake table, through delta-rs
(the ``deltalake`` package): no JVM, and each commits an ordinary Delta version that
Spark readers and a running stream take as they take any other.

Compaction commits with ``dataChange: false``, so a stream reading the table skips it
(the rows are those it has read). Vacuum runs in delta-rs' full mode (see :func:`vacuum`):
it deletes what no version within the retention uses, never a file written within it (a
batch being written now), and keeps every file of the versions from ``keep_from`` on (a
stream's unread versions).
"""

from __future__ import annotations

import errno
import json
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Any

from streamsmith.object_store import ObjectPath, storage_options

RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"
LOG_RETENTION_PROPERTY = "delta.logRetentionDuration"
# Delta's default: a version's log entry is kept 30 days, so time travel needs no more.
DEFAULT_LOG_RETENTION_HOURS = 30 * 24


@dataclass(frozen=True)
class Compaction:
    """What one ``OPTIMIZE`` did: files removed and added, the version it committed."""

    files_removed: int
    files_added: int
    version: int


def _table(path: Path) -> Any:
    from deltalake import DeltaTable

    return DeltaTable(str(path), storage_options=storage_options(path))


def compact(path: Path, target_bytes: int | None = None) -> Compaction:
    """Compact the small files of the table at ``path`` (a no-op commits nothing)."""
    table = _table(path)
    metrics = table.optimize.compact(target_size=target_bytes)
    return Compaction(
        int(metrics.get("numFilesRemoved", 0)),
        int(metrics.get("numFilesAdded", 0)),
        table.version(),
    )


def interval_hours(hours: int) -> str:
    """A retention as Delta writes its table properties."""
    return f"interval {hours} hours"


def tombstone_hours(hours: int) -> int:
    """The ``delta.deletedFileRetentionDuration`` written for a vacuum retention of
    ``hours``: twice it. Delta drops the record of a removed file (its tombstone) from the
    log's checkpoints once that duration has passed, and delta-rs' lite vacuum found the
    files to delete through those records only. At ``hours`` itself, a table
    checkpointing every few commits lost each record before a vacuum saw it, and its
    replaced files stayed for ever (the long run's table: 7,415 files, 9 of them live).
    The full mode :func:`vacuum` runs now finds those too, by listing the table; the
    records still spare it the listing's age check for files removed within ``hours``."""
    return 2 * hours


def declare_retention(path: Path, hours: int, log_hours: int | None = None) -> dict[str, str]:
    """Make :func:`tombstone_hours` of ``hours`` the table's
    ``delta.deletedFileRetentionDuration`` and ``log_hours`` its
    ``delta.logRetentionDuration`` (None: leave Delta's, unless shorter than ``hours``:
    time travel within ``hours`` reads the log of those versions); returns the properties
    it changed (none: no commit)."""
    table = _table(path)
    current = table.metadata().configuration
    wanted = {RETENTION_PROPERTY: interval_hours(tombstone_hours(hours))}
    if log_hours is not None:
        wanted[LOG_RETENTION_PROPERTY] = interval_hours(max(hours, log_hours))
    elif hours > _hours(current.get(LOG_RETENTION_PROPERTY), DEFAULT_LOG_RETENTION_HOURS):
        wanted[LOG_RETENTION_PROPERTY] = interval_hours(hours)
    changed = {key: value for key, value in wanted.items() if current.get(key) != value}
    if changed:
        table.alter.set_table_properties(changed)
    return changed


def _hours(interval: str | None, default: int) -> float:
    """Hours in a Delta interval property such as ``interval 30 days`` (``default`` when
    unset or in a form this does not read)."""
    if interval is None:
        return default
    from streamsmith.config import parse_duration

    words = interval.lower().removeprefix("interval").strip()
    try:
        return parse_duration(words) / 3600
    except ValueError:
        return default


@dataclass(frozen=True)
class Vacuumed:
    """What one ``VACUUM`` deleted (or, in a dry run, would delete)."""

    files: list[str]  # data and change-feed files, relative to the table
    checksums: int = 0  # Hadoop's ``.name.crc`` files whose file is gone
    folders: int = 0  # empty partition folders


def vacuum(
    path: Path,
    hours: int,
    keep_from: int | None = None,
    *,
    dry_run: bool = False,
    enforce: bool = False,
) -> Vacuumed:
    """Delete the files of the table at ``path`` that no version within ``hours`` uses,
    except those of version ``keep_from`` and later (a stream's unread versions).

    That is delta-rs' full mode: the files versions removed more than ``hours`` ago, and
    the Parquet files no version mentions once written more than ``hours`` ago (a batch
    killed before its commit, or Spark for an empty partition, left them, or their
    removal's record left the log before a vacuum saw it); change-feed files
    (``_change_data``) of versions before ``keep_from`` too, which the lite mode never
    deletes. A file written within ``hours`` is never touched: it may belong to a commit
    being written. Then, on a local disk, the checksum files Hadoop wrote beside deleted
    files and the partition folders left empty, unchanged for ``hours``. ``enforce``
    refuses an ``hours`` shorter than the table's ``delta.deletedFileRetentionDuration``
    (:func:`tombstone_hours` of the maintenance's retention: the check is off for it)."""
    table = _table(path)
    keep = list(range(keep_from, table.version() + 1)) if keep_from is not None else None
    found: list[str] = table.vacuum(
        retention_hours=hours, dry_run=True, enforce_retention_duration=enforce,
        keep_versions=keep, full=True,
    )  # fmt: skip
    unread = change_files(path, keep_from) if keep_from is not None else set()
    # Only Parquet files, data or change files, and no hidden one: full mode takes any
    # file no version adds for an orphan, a deletion vector (``.bin``) a version uses or
    # a checksum in a partition folder too. delta-rs lists a removed file for as long as
    # the log records its removal, deleted by an earlier vacuum or not: only those still
    # there count.
    files = [
        name
        for name in found
        if name not in unread
        and name.endswith(".parquet")
        and not PurePosixPath(name).name.startswith((".", "_"))
        and _delete(path / name, dry_run)
    ]
    if dry_run or isinstance(path, ObjectPath):  # an object store has neither
        return Vacuumed(files)
    before = datetime.now().timestamp() - hours * 3600
    return Vacuumed(files, _orphan_checksums(path), _empty_folders(path, before))


def _delete(file: Path, dry_run: bool) -> bool:
    """Delete ``file`` (a dry run: only look); whether it was there."""
    if dry_run or isinstance(file, ObjectPath):  # an object store's delete of none succeeds
        if not file.exists():
            return False
        if dry_run:
            return True
    try:
        file.unlink()
    except FileNotFoundError:
        return False
    return True


def change_files(path: Path, since: int) -> set[str]:
    """The change-feed files (``cdc`` actions) of the table's commits from version
    ``since`` on, as paths relative to the table: a stream reading its change feed reads
    them for the versions it has not read yet."""
    from urllib.parse import unquote

    found = set()
    for commit in (path / "_delta_log").glob("*.json"):
        if not commit.name[:20].isdigit() or int(commit.name[:20]) < since:
            continue
        for line in commit.read_text().splitlines():
            if '"cdc"' in line:
                action = json.loads(line).get("cdc")
                if action:
                    found.add(unquote(action["path"]))
    return found


def _orphan_checksums(path: Path) -> int:
    """Delete the ``.name.crc`` files Hadoop's local file system wrote beside the table's
    files whose ``name`` is gone (deleted by this vacuum or an earlier one): nothing else
    deletes them. How many."""
    removed = 0
    for checksum in path.rglob(".*.crc"):
        if checksum.parent.name == "_delta_log" or ".tmp" in checksum.name:
            continue
        if not (checksum.parent / checksum.name[1:-4]).exists():
            checksum.unlink(missing_ok=True)
            removed += 1
    return removed


def _empty_folders(path: Path, before: float) -> int:
    """Remove the table's partition folders that are empty and unchanged since
    ``before`` (a timestamp): expiry and vacuum empty one a partition at a time, and a
    writer adding to a partition writes its file at once after making the folder (a
    parent emptied here has changed now: a later vacuum removes it). How many."""
    removed = 0
    for folder, subfolders, files in os.walk(path, topdown=True):
        subfolders[:] = [name for name in subfolders if not name.startswith(("_", "."))]
        if files or subfolders or folder == str(path):
            continue
        try:
            if os.stat(folder).st_mtime < before:
                os.rmdir(folder)
                removed += 1
        except OSError as exc:  # gone already, or a writer has just put a file in it
            if exc.errno not in (errno.ENOENT, errno.ENOTEMPTY):
                raise
    return removed


def prune_checksums(path: Path) -> int:
    """Delete the checksum files of the log versions a log cleanup removed; how many.
    Spark's Delta deletes a version's checksums with its commit; delta-rs' cleanup, run
    after its own commits (the maintenance's), deletes the commit and checkpoint files
    older than ``delta.logRetentionDuration`` but leaves Delta's version checksum
    (``N.crc``, about 10 KB here) and, on a local disk, Hadoop's ``.N.json.crc`` beside
    each: three files a commit for ever (Delta had the same bug, delta-io/delta#4475). A
    version older than the oldest commit or checkpoint left cannot be read, nor its
    checksum used: those go. Files being written (``.tmp``) are never touched."""
    if isinstance(path, ObjectPath):
        return 0  # no Hadoop checksums there; Delta's own are left to its cleanup
    log = path / "_delta_log"
    kept = [int(f.name[:20]) for f in log.iterdir() if _version_file(f.name)]
    if not kept:
        return 0
    oldest = min(kept)
    removed = 0
    for file in list(log.iterdir()):
        name = file.name.removeprefix(".")
        if not name.endswith(".crc") or ".tmp" in name or not name[:20].isdigit():
            continue
        if int(name[:20]) < oldest:
            file.unlink(missing_ok=True)
            removed += 1
    return removed


def _version_file(name: str) -> bool:
    """A commit (``N.json``) or a checkpoint (``N.checkpoint[...].parquet``) of the log."""
    if not name[:20].isdigit():
        return False
    rest = name[20:]
    return rest == ".json" or (rest.startswith(".checkpoint") and rest.endswith(".parquet"))


@dataclass(frozen=True)
class Expiry:
    """What one expiry deleted: whole partitions of ``column`` up to ``upto``."""

    partitions: int
    rows: int
    column: str | None = None
    upto: str | None = None
    version: int | None = None


def expire(path: Path, hours: int, now: datetime) -> Expiry:
    """Delete the partitions of the table at ``path`` whose files were all written more
    than ``hours`` before ``now``, the oldest first, up to the first that holds a newer
    file (a table with one partition column that grows with time: a quarantine's
    ``ingest_date``, a late table's ``batch_id``). Whole partitions only, so the commit
    removes files and rewrites none; no expired partition: no commit."""
    table = _table(path)
    columns = list(table.metadata().partition_columns)
    if len(columns) != 1:
        raise ValueError(
            f"{path} is partitioned by {columns or 'nothing'}: expiry deletes whole "
            "partitions of one column that grows with time"
        )
    (column,) = columns
    import pyarrow as pa

    files = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    newest: dict[Any, int] = {}
    for file in files:
        value = file[f"partition.{column}"]
        newest[value] = max(newest.get(value, 0), int(file["modification_time"]))
    cutoff_ms = int((now - timedelta(hours=hours)).timestamp() * 1000)
    expired = []
    for value in sorted(newest, key=lambda v: (v is None, v)):
        if value is None or newest[value] >= cutoff_ms:
            break
        expired.append(value)
    if not expired:
        return Expiry(0, 0)
    upto = expired[-1]
    literal = str(upto) if isinstance(upto, int) else f"'{upto}'"
    metrics = table.delete(f"{column} <= {literal}")
    return Expiry(len(expired), int(metrics.get("num_deleted_rows", 0)), column, str(upto),
                  table.version())  # fmt: skip


def latest_version(path: Path) -> int:
    """The table's latest version."""
    return int(_table(path).version())


def table_id(path: Path) -> str:
    """The table's id (``metaData.id``), which a stream reading it keeps in its offsets."""
    return str(_table(path).metadata().id)
