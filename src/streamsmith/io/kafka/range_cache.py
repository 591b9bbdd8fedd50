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
- The files are records from the broker that another local user must neither read nor
  plant: the folder (``<streamsmith cache>/kafka-ranges`` unless ``rangeCacheDir`` names
  one) must be this user's and closed to others (0700, checked at each use), files are
  created 0600 with ``O_EXCL|O_NOFOLLOW`` and never opened through a symlink, and each
  range carries a MAC (HMAC-SHA256 under a key kept 0600 in the folder) that is checked
  before it is served: a file the cache did not write is ignored and the range consumed
  from the broker.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamsmith.io.kafka.offsets import json_within
from streamsmith.processes import PRIVATE_FILE_MODE, private_dir, read_own_file, write_new_file
from streamsmith.spark.jars import cache_dir

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

RANGE_CACHE = "rangeCache"  # the source options that switch it on
RANGE_CACHE_READERS = "rangeCacheReaders"
RANGE_CACHE_COUNTED = "rangeCacheCounted"
DEFAULT_TTL_S = 120.0
KEY_FILE = ".key"  # the folder's MAC key: never swept


def default_dir() -> Path:
    """Where ranges are cached unless ``rangeCacheDir`` says: in streamsmith's cache, per user."""
    return cache_dir() / "kafka-ranges"


@dataclass(frozen=True)
class RangeCache:
    """Where a group of queries shares the ranges they read, and how many read each."""

    group: str
    readers: int
    folder: Path = field(default_factory=default_dir)
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
        path = private_dir(self.folder) / f"{self._digest(['plan', start])}.plan"
        try:
            agreed: dict[str, Any] = json.loads(read_own_file(path))
        except FileNotFoundError:
            return self._propose(path, own)
        if json_within(agreed, own):
            return agreed
        return own

    def _propose(self, path: Path, own: dict[str, Any]) -> dict[str, Any]:
        staging = _staging(path)
        write_new_file(staging, json.dumps(own).encode())
        try:
            os.link(staging, path)  # atomic, and fails if another query planned first
        except FileExistsError:
            winner: dict[str, Any] = json.loads(read_own_file(path))
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
        path = private_dir(self.folder) / f"{digest}.arrow"
        if not self.counted:
            yield from self._peek(path, consume)
            return
        with _locked(self.folder / f"{digest}.lock"):
            data = _verified(path)
            fresh = data is None
            if fresh:
                data = _consume_into(path, consume)
                if data is None:
                    return  # nothing in the range (records gone, failOnDataLoss=false)
            self._count_read(path)
        if fresh:
            self._sweep()
        reader = pa.ipc.open_file(pa.BufferReader(data))
        for index in range(reader.num_record_batches):
            yield reader.get_batch(index)

    def _peek(
        self, path: Path, consume: Callable[[], Iterator[pa.RecordBatch]]
    ) -> Iterator[pa.RecordBatch]:
        """An uncounted read: the shared file when it is complete, else the broker."""
        import pyarrow as pa

        data = _verified(path)  # a file under its name is complete
        if data is None:
            yield from consume()
            return
        reader = pa.ipc.open_file(pa.BufferReader(data))
        for index in range(reader.num_record_batches):
            yield reader.get_batch(index)

    def _count_read(self, path: Path) -> None:
        """Note one more reader (the lock is held; its bytes are already read); the last
        one deletes the file."""
        counter = path.with_suffix(".reads")
        try:
            done = int(read_own_file(counter)) + 1
        except FileNotFoundError:
            done = 1
        counter.unlink(missing_ok=True)
        if done >= self.readers:
            path.unlink(missing_ok=True)
            path.with_suffix(".mac").unlink(missing_ok=True)
            # A task still waiting on this lock finds no file and consumes again: correct.
            path.with_suffix(".lock").unlink(missing_ok=True)
        else:
            write_new_file(counter, str(done).encode())
            if path.exists():
                os.utime(path, follow_symlinks=False)

    def _sweep(self) -> None:
        """Delete files nobody used for ``ttl_s``: leftovers of skipped or cut-off reads."""
        cutoff = time.time() - self.ttl_s
        for leftover in self.folder.iterdir():
            try:
                stale = leftover.stat().st_mtime < cutoff
            except FileNotFoundError:
                continue  # another task removed it meanwhile
            kinds = (".arrow", ".mac", ".reads", ".tmp", ".lock", ".plan")
            if stale and leftover.suffix in kinds:
                log.info("removing unused cached Kafka range %s", leftover.name)
                leftover.unlink(missing_ok=True)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    descriptor = os.open(path, flags, PRIVATE_FILE_MODE)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        os.utime(descriptor)  # a lock in use is never stale for the sweep
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _staging(path: Path) -> Path:
    return path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def _folder_key(folder: Path) -> bytes:
    """The folder's MAC key, made on first use (0600, exclusively: one creator wins)."""
    file = folder / KEY_FILE
    try:
        return read_own_file(file)
    except FileNotFoundError:
        pass
    with suppress(FileExistsError):  # another task made it meanwhile
        write_new_file(file, secrets.token_bytes(32))
    return read_own_file(file)


def _mac(folder: Path, data: bytes) -> bytes:
    return hmac.new(_folder_key(folder), data, hashlib.sha256).hexdigest().encode()


def seal(path: Path, data: bytes | None = None) -> None:
    """Record the MAC of the range file ``path`` (holding ``data``, read if not given)
    beside it (``.mac``), so the cache serves it."""
    mac = path.with_suffix(".mac")
    staging = _staging(mac)
    write_new_file(staging, _mac(path.parent, read_own_file(path) if data is None else data))
    staging.replace(mac)


def _verified(path: Path) -> bytes | None:
    """The bytes of the range file ``path`` if it is there and the cache wrote it (its
    MAC matches), else None; a file without its MAC is a miss, one with a wrong MAC (or
    a symlink) is logged and ignored."""
    try:
        data = read_own_file(path)
        recorded = read_own_file(path.with_suffix(".mac"))
    except FileNotFoundError:
        return None  # not cached, or deleted by its last reader meanwhile
    except OSError as exc:  # a symlink under the name (ELOOP)
        log.warning("ignoring cached Kafka range %s: %s", path, exc.strerror)
        return None
    if hmac.compare_digest(recorded, _mac(path.parent, data)):
        return data
    log.warning("ignoring cached Kafka range %s: the cache did not write it", path)
    return None


def _consume_into(path: Path, consume: Callable[[], Iterator[pa.RecordBatch]]) -> bytes | None:
    """Write every batch of ``consume()`` to ``path`` (sealed), which appears only when
    complete; return its bytes, or None when there was no batch."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    writer: pa.ipc.RecordBatchFileWriter | None = None
    for batch in consume():
        if writer is None:
            writer = pa.ipc.new_file(sink, batch.schema)
        writer.write_batch(batch)
    if writer is None:
        return None
    writer.close()
    data: bytes = sink.getvalue().to_pybytes()
    staging = _staging(path)
    try:
        write_new_file(staging, data)
        seal(path, data)
        staging.replace(path)  # the MAC is in place before the file appears
    finally:
        staging.unlink(missing_ok=True)
    return data
