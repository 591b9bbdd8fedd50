"""Move a file source's files out of its directory once every query reading them has
committed them: the spec's ``sources.<name>.archive``.

Spark's file source lists its whole directory at every trigger, so a directory that
keeps every file ever delivered makes each micro-batch slower as the weeks go by
(``benchmarks/file_listing.py``: 55 ms a trigger with 2,000 files here, 255 ms with
20,000, per query). Spark's own ``cleanSource`` option moves a file when
*its* query commits it, which would take input from under a flow's quarantine and
late-events queries, and from other flows reading the same source. Here a file moves
only when the checkpoint of every query reading the source has committed the batch that
read it: the queries the plan runs (a flow's table, its quarantine, its late events, its
further sinks), and the table query of every disabled flow reading it that has run
before; until each has a checkpoint, nothing moves. A flow that never ran (an
alternative an app ships disabled) holds nothing back: enabled, it starts from the files
still in the directory, as a flow added later does. A file keeps its path below the
source's directory in the archive. A batch planned but not committed (replayed on
restart) reads files past the committed end, which stay. ``backfill`` reads the archive
beside the directory.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from streamsmith.config import PipelineSpec
from streamsmith.errors import UserError
from streamsmith.object_store import ObjectPath
from streamsmith.runtime.source_logs import FileSourceLog

log = logging.getLogger(__name__)

ARCHIVE_EVERY_S = 10.0  # how often a run that stays up archives, at most
Record = Callable[[dict[str, Any]], dict[str, Any]]


def reader_flows(spec: PipelineSpec, source: str) -> tuple[str, ...]:
    """Every flow of the spec reading ``source``, enabled or not."""
    return tuple(
        name
        for name, flow in spec.flows.items()
        if flow.source == source or source in flow.streams.values()
    )


def check_archive(spec: PipelineSpec, source: str) -> None:
    """Refuse an ``archive`` this module cannot keep safe: on object storage, inside the
    source's directory (Spark would list it) or around it, or read by a flow with
    several inputs (whose checkpoints number their sources by position)."""
    path, archive = spec.source_path(source), spec.archive_path(source)
    if path is None or archive is None:
        return
    where = f"sources.{source}.archive (in {spec.origin_of(('sources', source, 'archive'))})"
    if isinstance(archive, ObjectPath) or isinstance(path, ObjectPath):
        raise UserError(f"{where}: archiving moves local files; the source is on object storage")
    if archive.is_relative_to(path) or path.is_relative_to(archive):
        raise UserError(
            f"{where}: {archive} and the source's directory {path} must not contain one "
            "another: Spark lists the source's directory, subfolders too"
        )
    several = [f for f in reader_flows(spec, source) if spec.flows[f].streams]
    if several:
        raise UserError(
            f"{where}: flow(s) {', '.join(several)} read several sources; archive a "
            "source read by one-source flows only"
        )


@dataclass(eq=False)  # keeps a cache of the logs read: compared by identity
class SourceArchive:
    """The archive of one file source: ``path``'s files go to ``archive`` once the
    checkpoint of each of ``readers`` (every query reading the source) has committed
    them; a reader without a checkpoint yet has committed nothing. A ``paused`` reader
    (a disabled flow's) counts once it has a checkpoint: a flow that ran holds back what
    it has not read, one that never ran starts, when enabled, from what is left."""

    source: str
    path: Path
    archive: Path
    readers: tuple[Path, ...]
    paused: tuple[Path, ...] = ()  # readers only once their checkpoint exists
    _logs: dict[Path, FileSourceLog] = field(default_factory=dict, repr=False)
    # Per reader: the last log id taken in, and the files it committed not yet moved.
    _ends: dict[Path, int] = field(default_factory=dict, repr=False)
    _pending: dict[Path, set[str]] = field(default_factory=dict, repr=False)

    def committed(self, checkpoint: Path) -> set[str]:
        """The files (local paths) the query at ``checkpoint`` has committed that this
        archive has not moved yet: each pass takes in only what was committed since."""
        pending = self._pending.setdefault(checkpoint, set())
        batches = [int(p.name) for p in (checkpoint / "commits").glob("[0-9]*") if p.name.isdigit()]
        if not batches:
            return pending
        files = self._logs.setdefault(checkpoint, FileSourceLog(checkpoint))
        end = files.log_offset(max(batches))
        seen = self._ends.get(checkpoint, -1)
        if end is not None and end > seen:
            pending.update(unquote(path) for path in files.files_of(seen + 1, end))
            files.forget_through(end)
            self._ends[checkpoint] = end
        return pending

    def run(self) -> int:
        """Move every file all readers committed; how many moved."""
        readers = [*self.readers, *(path for path in self.paused if path.is_dir())]
        if not readers:
            return 0
        pending = [self.committed(checkpoint) for checkpoint in readers]
        moved = 0
        for name in sorted(set.intersection(*pending)):
            file = Path(name)
            if file.is_file() and file.is_relative_to(self.path):
                target = self.archive / file.relative_to(self.path)
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.replace(file, target)
                except OSError:  # another file system: copy, then remove
                    shutil.move(file, target)
                moved += 1
            # else moved before, or not under the source's directory: nothing to do
            for files in pending:
                files.discard(name)
        return moved


def restore(archive: SourceArchive, reset: Iterable[Path]) -> str | None:
    """After a full refresh removed the checkpoints ``reset``: when every query reading
    the source starts over, its archived files move back (each query reads them again,
    as before the archive); when only some do, what they will not read. None: nothing
    was archived, or no reader of it was reset."""
    kept = archive.archive
    files = [f for f in kept.rglob("*") if f.is_file()] if kept.is_dir() else []
    gone = set(reset)
    readers = [*archive.readers, *(p for p in archive.paused if p.is_dir() or p in gone)]
    starting_over = [r for r in readers if r in gone or any(r.is_relative_to(g) for g in gone)]
    if not files or not starting_over:
        return None
    if len(starting_over) < len(readers):
        return (
            f"source {archive.source}: the queries starting over read only the files still in "
            f"{archive.path}; the {len(files)} files in {archive.archive} stay there, since "
            "other queries reading the source go on from their checkpoints"
        )
    for file in files:
        target = archive.path / file.relative_to(archive.archive)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(file, target)
    return (
        f"source {archive.source}: {len(files)} archived files moved back to {archive.path}, "
        "since every query reading it starts over"
    )


def archive_inputs(archives: Iterable[SourceArchive], record: Record) -> list[dict[str, Any]]:
    """Run each archive; an ``input_archived`` event for each that moved files, an
    ``input_archive_failed`` one (and a warning) for each that could not."""
    written = []
    for archive in archives:
        event = {"source": archive.source, "archive": str(archive.archive)}
        try:
            moved = archive.run()
        except OSError as exc:  # recorded, never silent; the next pass tries again
            message = f"archive of source {archive.source} failed: {exc}"
            log.warning(message)
            written.append(record({**event, "event": "input_archive_failed", "message": message}))
            continue
        if moved:
            message = f"{moved} files read by every flow moved to {archive.archive}"
            written.append(record({**event, "event": "input_archived", "files": moved,
                                   "message": message}))  # fmt: skip
    return written
