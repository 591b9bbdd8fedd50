"""The event log: every lifecycle, progress, failure, restart and alert event of a run.

One JSON-lines file per process under ``<storage_root>/_monitor/events``, appended and
flushed line by line (a process starts a new file once its current one passes
``max_bytes``, and then deletes the app's files older than ``retention_s``: an always-on
run's log stays bounded without a restart), so ``status`` and the dashboard can read it
while the run goes on and after it ends (or was killed: a torn last line is skipped). A
line that is not a JSON object anywhere else (a disk error, an edit) is skipped too,
counted and logged as a warning naming the file and where: one bad line must not blank
``status`` or the dashboard. ``streamsmith query`` reads the same files as the table
``streamsmith_events``.

Secrets (a PostgreSQL DSN or password, a webhook URL, Kafka passwords) are replaced by
``***`` in every record before it is written.
"""

from __future__ import annotations

import heapq
import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamsmith.object_store import local_side
from streamsmith.secrets import redact_text, secret_parts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

EVENTS_DIR = Path("_monitor") / "events"
EVENTS_VIEW = "streamsmith_events"
_CHUNK = 1 << 22  # bytes of a log read at a time

# The columns of ``streamsmith_events`` by Spark type name (as in a schema's JSON): plain
# data, so that readers without a JVM (the DuckDB fast path) type the log the same way.
EVENT_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("time", "timestamp"),
    ("app", "string"),
    ("pid", "long"),
    ("event", "string"),
    ("query", "string"),
    ("query_id", "string"),
    ("run_id", "string"),
    ("batch_id", "long"),
    ("batch_time", "timestamp"),
    ("input_rows", "long"),
    ("output_rows", "long"),
    ("input_rate", "double"),
    ("process_rate", "double"),
    ("batch_ms", "long"),
    ("watermark", "timestamp"),
    ("watermark_delay_s", "double"),
    ("state_rows", "long"),
    ("state_memory_bytes", "long"),
    ("dropped_by_watermark", "long"),
    ("quarantined", "long"),
    ("late", "long"),
    ("lag", "long"),
    ("lag_bytes", "long"),
    ("latency_p50_ms", "long"),
    ("latency_p99_ms", "long"),
    ("latency_max_ms", "long"),
    ("attempt", "long"),
    ("rule", "string"),
    ("message", "string"),
    ("sources", "string"),
    ("progress", "string"),
    # runs: which queries, and for a scheduled one its schedule and due times
    ("queries", {"type": "array", "elementType": "string", "containsNull": True}),
    ("schedule", "string"),
    ("cron", "string"),
    ("scheduled_for", "timestamp"),
    ("next_due", "timestamp"),
    ("nothing_new", "boolean"),
)


def event_schema() -> StructType:
    """The event log's Spark schema, built from :data:`EVENT_COLUMNS`."""
    from pyspark.sql.types import StructType

    fields = [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in EVENT_COLUMNS]
    return StructType.fromJson({"type": "struct", "fields": fields})


def events_dir(root: Path) -> Path:
    """Where the event logs of the pipelines under ``root`` live (on local disk for a
    root on S3: a log is appended to line by line)."""
    return local_side(root) / EVENTS_DIR


def now_text() -> str:
    """The current UTC time as the event log writes it."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class EventLog:
    """Appends this process's events to its own file; safe to call from any thread.

    Past ``max_bytes`` the next event starts a new file (named by the time, so it sorts
    after the last) and the app's files last written more than ``retention_s`` ago are
    deleted; readers take every file in name order, so nothing they fold changes but the
    events deleted."""

    def __init__(
        self,
        root: Path,
        app: str,
        secrets: Iterable[str] = (),
        *,
        max_bytes: int | None = None,
        retention_s: float | None = None,
    ) -> None:
        self.app = app
        self.root = root
        self.secrets = {part for secret in secrets for part in secret_parts(secret)}
        self.max_bytes = max_bytes
        self.retention_s = retention_s
        events_dir(root).mkdir(parents=True, exist_ok=True)
        self.path = self._new_path()
        self._size = self.path.stat().st_size if self.path.exists() else 0
        self._lock = threading.Lock()

    def _new_path(self) -> Path:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        return events_dir(self.root) / f"{self.app}-{stamp}-{os.getpid()}.jsonl"

    def write(self, record: dict[str, Any]) -> dict[str, Any]:
        """Stamp ``record`` (time, app, pid), redact it, append it; return what was written."""
        stamped = {"time": now_text(), "app": self.app, "pid": os.getpid(), **record}
        line = self.redact(json.dumps(stamped, default=str))
        with self._lock:
            if self.max_bytes is not None and self._size >= self.max_bytes:
                self._rotate()
            with self.path.open("a", encoding="utf-8") as file:
                file.write(line + "\n")
            self._size += len(line.encode()) + 1
        written: dict[str, Any] = json.loads(line)
        return written

    def _rotate(self) -> None:
        """Start a new file, unless the second has not changed (the name would not: the
        next write tries again), then delete files past the retention."""
        path = self._new_path()
        if path == self.path:
            return
        self.path, self._size = path, 0
        if self.retention_s is not None:
            for removed in prune_event_logs(self.root, self.app, self.retention_s):
                log.info("event log %s deleted: older than the retention", removed)

    def redact(self, text: str) -> str:
        """``text`` with every known secret and its parts (JSON-escaped too) replaced."""
        return redact_text(text, self.secrets)


def prune_event_logs(root: Path, app: str, older_than_s: float) -> list[Path]:
    """Delete ``app``'s event logs last written more than ``older_than_s`` ago."""
    cutoff = time.time() - older_than_s
    removed = [path for path in log_files(root, app) if path.stat().st_mtime < cutoff]
    for path in removed:
        path.unlink()
    return removed


def read_events(root: Path, app: str | None = None) -> list[dict[str, Any]]:
    """Every event under ``root`` (of ``app`` only, when given), oldest first."""
    events = [
        event
        for path in log_files(root, app)
        for event in _lines(path)
        if app is None or event.get("app") == app
    ]
    events.sort(key=lambda event: str(event.get("time", "")))
    return events


class LogTail:
    """The whole lines of one log from byte ``offset`` on, read in chunks as iterated;
    ``offset`` then says where the next read starts. A line still being written (or torn
    by a kill) is left for a later read; a malformed whole line is skipped and counted
    in ``malformed``."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = path
        self.offset = offset
        self.malformed = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        with self.path.open("rb") as log:
            log.seek(self.offset)
            rest = b""
            while chunk := log.read(_CHUNK):
                data = rest + chunk
                end = data.rfind(b"\n") + 1
                for line in data[:end].split(b"\n")[:-1]:
                    event = _event(line)
                    if event is _MALFORMED:
                        self.malformed += 1
                        _warn_malformed(self.path, f"byte {self.offset}")
                    elif event is not None:
                        yield event
                    self.offset += len(line) + 1
                rest = data[end:]


_MALFORMED: dict[str, Any] = {}  # what _event gives for a line that is no event


def _event(line: bytes | str) -> dict[str, Any] | None:
    """One line of a log as its event: None for a blank line, ``_MALFORMED`` for one that
    is not a JSON object of an event's shape (:func:`is_event`)."""
    if not line.strip():
        return None
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the stack
        return _MALFORMED
    return event if is_event(event) else _MALFORMED


# What each column's values are in Python, by its Spark type name (None: any value is).
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "long": (int,), "double": (int, float), "boolean": (bool,),
    "timestamp": (str,),
}  # fmt: skip
_COLUMN_TYPES = {
    name: _PYTHON_TYPES[kind] if isinstance(kind, str) else (list,) for name, kind in EVENT_COLUMNS
}


def is_event(value: object) -> bool:
    """Whether ``value`` has the shape of an event, as ``status`` and the dashboard fold
    it: a JSON object whose columns (:data:`EVENT_COLUMNS`) hold their types or null
    (times ISO 8601, run queries strings), whose ``expectations`` map rules to counts and
    whose ``graph`` is a list. Written by :class:`EventLog`, every event has it; a line
    edited or damaged into another shape is skipped, not folded into an error."""
    if not isinstance(value, dict):
        return False
    for name, kinds in _COLUMN_TYPES.items():
        field = value.get(name)
        if field is None:
            continue
        if not isinstance(field, kinds) or (isinstance(field, bool) and bool not in kinds):
            return False
        if name in _TIMES and not _is_time(field):
            return False
    if not all(isinstance(query, str) for query in value.get("queries") or ()):
        return False
    return _are_counts(value.get("expectations")) and isinstance(value.get("graph", []), list)


_TIMES = frozenset(name for name, kind in EVENT_COLUMNS if kind == "timestamp")


def _is_time(text: object) -> bool:
    try:
        datetime.fromisoformat(str(text))
    except ValueError:
        return False
    return True


def _are_counts(expectations: object) -> bool:
    """Whether ``expectations`` is absent or maps each rule to whole counts."""
    if expectations is None:
        return True
    return isinstance(expectations, dict) and all(
        isinstance(counts, dict)
        and all(isinstance(n, int) and not isinstance(n, bool) for n in counts.values())
        for counts in expectations.values()
    )


def _warn_malformed(path: Path, where: str) -> None:
    log.warning("event log %s: the line at %s is not a JSON object, skipped", path, where)


class LogFollower:
    """An app's event logs read as they grow: each call of :meth:`events` yields what
    was written since the last, oldest first, from ``offsets`` (file name -> bytes read)
    on. Each log is in time order (one process appends it), so the logs are merged as
    they are read, not held and sorted."""

    def __init__(self, root: Path, app: str | None, offsets: dict[str, int] | None = None):
        self.root = root
        self.app = app
        self.offsets = dict(offsets or {})
        self.malformed = 0  # lines skipped so far, as not JSON objects

    def rewritten(self) -> bool:
        """Whether the logs read changed other than by growing (one shrank or was pruned)
        or a new one sorts before them, so folding on would differ from folding anew."""
        sizes = {path.name: path.stat().st_size for path in log_files(self.root, self.app)}
        if any(sizes.get(name, -1) < offset for name, offset in self.offsets.items()):
            return True
        newest_read = max(self.offsets, default="")
        return any(name not in self.offsets and name < newest_read for name in sizes)

    def events(self) -> Iterator[dict[str, Any]]:
        """The events written since the last call (``app``'s only, when given)."""
        tails = [
            LogTail(path, self.offsets.get(path.name, 0)) for path in log_files(self.root, self.app)
        ]
        for event in heapq.merge(*tails, key=lambda event: str(event.get("time", ""))):
            if self.app is None or event.get("app") == self.app:
                yield event
        self.offsets = {tail.path.name: tail.offset for tail in tails}
        self.malformed += sum(tail.malformed for tail in tails)


def log_files(root: Path, app: str | None) -> list[Path]:
    """The event logs under ``root`` (``app``'s only, when given), oldest first."""
    folder = events_dir(root)
    if not folder.is_dir():
        return []
    return sorted(folder.glob(f"{app}-*.jsonl" if app else "*.jsonl"))


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    """The records of one log; a process killed mid-write leaves a torn last line, which
    is skipped silently; any other malformed line is skipped with a warning."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    for number, line in enumerate(lines, start=1):
        event = _event(line)
        if event is _MALFORMED and number != len(lines):
            _warn_malformed(path, f"line {number}")
        elif event is not None and event is not _MALFORMED:
            yield event


def event_frame(spark: SparkSession, root: Path) -> DataFrame:
    """The event log as a DataFrame (empty with its schema when nothing ran yet)."""
    folder = events_dir(root)
    if not log_files(root, None):
        return spark.createDataFrame([], event_schema())
    return (
        spark.read.schema(event_schema())
        .option("mode", "DROPMALFORMED")  # only a killed process's torn last line
        .json(str(folder))
    )


def register_event_view(spark: SparkSession, root: Path) -> None:
    """Make the event log queryable as ``streamsmith_events``."""
    event_frame(spark, root).createOrReplaceTempView(EVENTS_VIEW)
