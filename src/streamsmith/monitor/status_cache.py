"""``status`` without reading the whole event log at every look.

An always-on app writes about a million events a day (a progress event per query and
batch), and folding them all took ``status`` 3.7 s and 660 MB for a few hours' worth.
The fold so far (:class:`~streamsmith.monitor.status.StatusFold`, plain data) is kept
under ``<storage_root>/_monitor/status/`` with how far into each log file it read; the
next look folds only what was written since. A log file that shrank or vanished (pruned)
or a new one that sorts before those read starts the fold again from the beginning.

Events new since the last look are folded in time order, as a whole read folds all of
them; only two processes of one app writing at once could see their events folded in
another order than a whole read's (the last state and error shown would then be the
other process's).
"""

from __future__ import annotations

import heapq
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

from streamsmith.monitor.eventlog import LogTail, log_files
from streamsmith.monitor.status import QueryStatus, StatusFold

log = logging.getLogger(__name__)

CACHE_DIR = Path("_monitor") / "status"
_FORMAT = 1  # the cache's layout and the fold's meaning: a new one starts afresh


def cached_statuses(
    root: Path, app: str | None = None, alive: Callable[[int], bool] | None = None
) -> list[QueryStatus]:
    """The statuses of the queries under ``root`` (of ``app`` only, when given), as
    :func:`~streamsmith.monitor.status.query_statuses` of the whole log gives them."""
    path = root / CACHE_DIR / f"{app or '_all'}.json"
    fold, offsets = _load(path)
    files = log_files(root, app)
    if _stale(offsets, files):
        fold, offsets = StatusFold(), {}
    tails = [LogTail(file, offsets.get(file.name, 0)) for file in files]
    # Each log is in time order (one process appends it): merged, not held and sorted.
    for event in heapq.merge(*tails, key=lambda event: str(event.get("time", ""))):
        if app is None or event.get("app") == app:
            fold.add(event)
    read = {tail.path.name: tail.offset for tail in tails}
    if read != offsets or not path.exists():
        _save(path, fold, read)
    return fold.statuses(alive)


def _stale(offsets: dict[str, int], files: list[Path]) -> bool:
    """Whether the files read before changed other than by growing, or a new one sorts
    before them (so its events would be folded out of order)."""
    sizes = {file.name: file.stat().st_size for file in files}
    if any(name not in sizes or sizes[name] < offset for name, offset in offsets.items()):
        return True
    newest_read = max(offsets, default="")
    return any(name not in offsets and name < newest_read for name in sizes)


def _load(path: Path) -> tuple[StatusFold, dict[str, int]]:
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return StatusFold(), {}
    except (OSError, ValueError) as exc:  # unreadable or torn: fold from the start
        log.debug("status cache %s not used: %s", path, exc)
        return StatusFold(), {}
    if not isinstance(kept, dict) or kept.get("format") != _FORMAT:
        return StatusFold(), {}
    return StatusFold(kept["entries"]), {str(k): int(v) for k, v in kept["offsets"].items()}


def _save(path: Path, fold: StatusFold, offsets: dict[str, int]) -> None:
    """Keep the fold for the next look; a storage root this user cannot write to (read
    only, someone else's) just means the next look folds everything again."""
    document = {"format": _FORMAT, "offsets": offsets, "entries": fold.entries}
    staging = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        staging.write_text(json.dumps(document), encoding="utf-8")
        staging.replace(path)
    except OSError as exc:
        log.debug("status cache %s not kept: %s", path, exc)
