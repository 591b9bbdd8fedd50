"""Consume each Kafka offset range once, however many of a flow's queries read it.

Every query reads its source itself: a flow's output, its quarantine and its late
events, and any other flow over the same source. On the Kafka path each would pay the
per-message Python cost again, and that cost bounds throughput. The records of ``[start, end)``
of a partition never change once written, so the first task to read a range keeps its
Arrow batches in a local file, and the other queries' tasks for the same range read
that file instead of the broker.

Safety:

- The key holds everything that decides the batches: the servers and consumer
  options, topic, partition, offsets, and the decoding options. A miss is always
  correct, only slower: a range cut differently, another executor, an evicted file.
- One task consumes a range at a time (an exclusive ``flock``, held only while it
  consumes; a killed process releases it), and a file appears under its final name
  only when complete (write-then-rename), so a reader never sees a partial range.
- A query that may skip its batches (a flow's quarantine and late-events queries, see
  ``streamsmith.runtime.flow_batches``) reads *uncounted*: it takes a range's file if it
  is there and consumes the broker otherwise, without writing a file or counting as a
  reader, so a batch it skips never keeps a file waiting for it.
- A file is deleted once the flow's ``readers`` queries have read it, and any file
  unused for ``ttl_s`` (a query that skipped its batch, a replay that never came) is
  swept when the next range is cached.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamsmith.io.kafka.offsets import json_within

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

RANGE_CACHE = "rangeCache"  # the source options that switch it on
RANGE_CACHE_READERS = "rangeCacheReaders"
RANGE_CACHE_COUNTED = "rangeCacheCounted"
DEFAULT_DIR = Path(tempfile.gettempdir()) / "streamsmith-kafka-ranges"
DEFAULT_TTL_S = 120.0


@dataclass(frozen=True)
class RangeCache:
    """Where a group of queries shares the ranges they read, and how many read each."""

    group: str
    readers: int
    folder: Path = DEFAULT_DIR
    ttl_s: float = DEFAULT_TTL_S
    counted: bool = True  # False: read a file if present, never write or count one

    def agreed_end(self, start: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
        """The end offsets of the group's batch from ``start``: those the first query to
        plan it chose, if they are within ``own`` (this query's own choice), else ``own``,
        kept for the others.

        Spark plans each query's batches on its own, so without this the queries cut
        the input differently whenever it grows between their plans (an
        ``availableNow`` target taken a moment later), and then never share a range.
        Every query starts from the same offsets and each batch starts where the last
        ended, so following the first planner keeps the group on one sequence of
        batches. (Used for catch-up runs only: in an always-on run it would hold a slow
        query to a fast one's small batches; see ``runtime.plan``.)
        """
        if own == start:  # nothing new: a later call may see more, so agree on nothing
            return own
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{self._digest(['plan', start])}.plan"
        try:
            agreed: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return self._propose(path, own)
        if json_within(agreed, own):
            return agreed
        return own

    def _propose(self, path: Path, own: dict[str, Any]) -> dict[str, Any]:
        staging = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        staging.write_text(json.dumps(own), encoding="utf-8")
        try:
            os.link(staging, path)  # atomic, and fails if another query planned first
        except FileExistsError:
            winner: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            return winner if json_within(winner, own) else own
        finally:
            staging.unlink()
        return own

    def _digest(self, key: object) -> str:
        text = json.dumps([self.group, key], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def read(
        self, key: dict[str, object], consume: Callable[[], Iterator[pa.RecordBatch]]
    ) -> Iterator[pa.RecordBatch]:
        """The range's batches: from the shared file when another query read it already,
        else consumed into that file first.

        The lock is held only to consume, never while Spark processes the batches, so
        a query's slow batch does not hold up the others' tasks for the same range.
        """
        import pyarrow as pa  # on use: planning a pipeline names this module

        digest = self._digest(key)
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{digest}.arrow"
        if not self.counted:
            yield from self._peek(path, consume)
            return
        with _locked(self.folder / f"{digest}.lock"):
            fresh = not path.exists()
            if fresh and not _consume_into(path, consume):
                return  # nothing in the range (records gone, failOnDataLoss=false)
            # Mapped under the lock: the mapping outlives the file's deletion.
            source = pa.memory_map(str(path))
            self._count_read(path)
        if fresh:
            self._sweep()
        reader = pa.ipc.open_file(source)
        for index in range(reader.num_record_batches):
            yield reader.get_batch(index)

    def _peek(
        self, path: Path, consume: Callable[[], Iterator[pa.RecordBatch]]
    ) -> Iterator[pa.RecordBatch]:
        """An uncounted read: the shared file when it is complete, else the broker."""
        import pyarrow as pa

        try:
            source = pa.memory_map(str(path))  # a file under its name is complete
        except FileNotFoundError:
            yield from consume()
            return
        reader = pa.ipc.open_file(source)
        for index in range(reader.num_record_batches):
            yield reader.get_batch(index)

    def _count_read(self, path: Path) -> None:
        """Note one more reader (the lock is held; its mapping is already open); the last
        one deletes the file."""
        counter = path.with_suffix(".reads")
        done = int(counter.read_text(encoding="utf-8")) + 1 if counter.exists() else 1
        if done >= self.readers:
            path.unlink(missing_ok=True)
            counter.unlink(missing_ok=True)
            # A task still waiting on this lock finds no file and consumes again: correct.
            path.with_suffix(".lock").unlink(missing_ok=True)
        else:
            counter.write_text(str(done), encoding="utf-8")
            if path.exists():
                os.utime(path)

    def _sweep(self) -> None:
        """Delete files nobody used for ``ttl_s``: leftovers of skipped or cut-off reads."""
        cutoff = time.time() - self.ttl_s
        for leftover in self.folder.iterdir():
            try:
                stale = leftover.stat().st_mtime < cutoff
            except FileNotFoundError:
                continue  # another task removed it meanwhile
            if stale and leftover.suffix in (".arrow", ".reads", ".tmp", ".lock", ".plan"):
                log.info("removing unused cached Kafka range %s", leftover.name)
                leftover.unlink(missing_ok=True)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        os.utime(path)  # a lock in use is never stale for the sweep
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _consume_into(path: Path, consume: Callable[[], Iterator[pa.RecordBatch]]) -> bool:
    """Write every batch of ``consume()`` to ``path``, which appears only when complete;
    False when there was none."""
    import pyarrow as pa

    staging = path.with_suffix(f".{os.getpid()}.tmp")
    writer: pa.ipc.RecordBatchFileWriter | None = None
    try:
        for batch in consume():
            if writer is None:
                writer = pa.ipc.new_file(str(staging), batch.schema)
            writer.write_batch(batch)
        if writer is None:
            return False
        writer.close()
        writer = None
        staging.replace(path)
        return True
    finally:
        if writer is not None:
            writer.close()
        staging.unlink(missing_ok=True)
