"""Counts a query's own code reports for a batch, merged into that batch's progress record.

Spark's observed metrics cover what a query's plan computes; the late-events companion
decides in its ``foreachBatch`` which events were too late, so it reports its count here
(as the quarantine does the rows it writes there).
Spark posts a batch's progress after ``foreachBatch`` returns, on the same driver, so
the count is waiting when the monitor records the progress.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

_KEEP = 256  # per process; only the newest batches can still be waiting for their progress
_lock = threading.Lock()
# Each reader takes its own copy of a count: the event log's recorder ("events") and the
# run's tally of rows written per query ("run"), which reads the same batch later.
READERS = ("events", "run")
_counts: OrderedDict[tuple[str, str, int, str], int] = OrderedDict()


def note(query: str, batch_id: int, metric: str, rows: int) -> None:
    """Report ``rows`` for ``metric`` of ``query``'s batch ``batch_id`` (a replay overwrites)."""
    with _lock:
        for reader in READERS:
            _counts[(reader, query, batch_id, metric)] = rows
        while len(_counts) > _KEEP * len(READERS):
            _counts.popitem(last=False)


def take(query: str, batch_id: int, metric: str, reader: str = "events") -> int | None:
    """The count reported for that batch, removed once ``reader`` took it; None if none was."""
    with _lock:
        return _counts.pop((reader, query, batch_id, metric), None)
