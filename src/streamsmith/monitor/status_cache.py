"""``status`` without reading the whole event log at every look.

An always-on app writes a progress event per query and batch, hundreds of thousands a
day; folding them all at every look cost seconds and memory for every event
(``benchmarks/status_log.py``). The fold so far (a
:class:`~streamsmith.monitor.status.StatusFold`, plain data) is kept under
``<storage_root>/_monitor/status/`` with how far into each log file it read; the next
look folds only what was written since. A log file that shrank or vanished (pruned) or
a new one that sorts before those read starts the fold again from the beginning.

Events new since the last look are folded in time order, as a whole read folds all of
them; only two processes of one app writing at once could see their events folded in
another order than a whole read's (the last state and error shown would then be the
other process's).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

from streamsmith.monitor.eventlog import LogFollower
from streamsmith.monitor.status import QueryStatus, StatusFold
from streamsmith.object_store import local_side

log = logging.getLogger(__name__)

CACHE_DIR = Path("_monitor") / "status"
_FORMAT = 2  # the cache's layout and the fold's meaning: a new one starts afresh


def cached_statuses(
    root: Path, app: str | None = None, alive: Callable[[int], bool] | None = None
) -> list[QueryStatus]:
    """The statuses of the queries under ``root`` (of ``app`` only, when given), as
    :func:`~streamsmith.monitor.status.query_statuses` of the whole log gives them."""
    path = local_side(root) / CACHE_DIR / f"{app or '_all'}.json"
    fold, offsets = _load(path)
    follower = LogFollower(root, app, offsets)
    if follower.rewritten():
        fold, follower.offsets = StatusFold(), {}
    for event in follower.events():
        fold.add(event)
    if follower.offsets != offsets or not path.exists():
        _save(path, fold, follower.offsets)
    return fold.statuses(alive)


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
