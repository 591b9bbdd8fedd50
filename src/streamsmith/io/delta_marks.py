"""Which micro-batches a query has written to a Delta table: the marks its commits carry.

A ``foreachBatch`` write to Delta (a ``MERGE`` of an update-mode batch, the overwrite of
a complete-mode one, a quarantine's or late events' append, the changes of a CDC flow)
must happen once per batch: a batch replayed after a crash between its Delta commit and
the checkpoint's commit must find itself written. Each such commit carries the writer
and the batch in its ``commitInfo.userMetadata``::

    {"streamsmith": {"writer": "streamsmith:<app>:<query>", "batch": 12}}

and the check reads the newest mark of the writer from the table's commit files, in the
driver's Python (``io.delta_log.commit_infos``, newest first, reading only as far as the
writer's newest mark, usually the newest commit): batches commit in order, so the newest
mark is the last batch written.

Delta's own idempotent writes (``txnAppId``/``txnVersion``) would do the same, but
Delta 4.4 answers ``txnVersion`` from the table's full state, which it rebuilds with
Spark jobs after every commit: two thirds of the JVM time of a small batch
(``benchmarks/delta_batch_marks.py``). They stay where a mark must outlive the log's
cleanup (a ``once`` flow's single append: ``durable``), and tables written before the
marks are read through them.

A mark lives as long as its commit's log entry: Delta removes entries older than the
table's ``delta.logRetentionDuration`` (30 days) at a checkpoint. A batch replayed after
its writer's marks are gone could not tell whether it was written; :func:`check_replay`
refuses to start such a query instead of guessing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from streamsmith.errors import UserError
from streamsmith.io.delta_log import commit_infos
from streamsmith.io.lake_paths import is_delta
from streamsmith.object_store import storage_options

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
MARK_KEY = "streamsmith"


def batch_mark(writer: str, batch_id: int) -> str:
    """The ``userMetadata`` of the commit writing micro-batch ``batch_id`` of ``writer``."""
    return json.dumps({MARK_KEY: {"writer": writer, "batch": batch_id}})


def marked_batch(user_metadata: object) -> tuple[str, int] | None:
    """(writer, batch) of a commit's ``userMetadata`` that is a streamsmith mark, else
    None (no user metadata, or a user's own)."""
    if not isinstance(user_metadata, str) or MARK_KEY not in user_metadata:
        return None
    try:
        mark = json.loads(user_metadata).get(MARK_KEY)
    except (ValueError, AttributeError):  # a user's own text that merely names us
        return None
    if not isinstance(mark, dict) or not isinstance(mark.get("batch"), int):
        return None
    return str(mark.get("writer")), int(mark["batch"])


def newest_mark(commits: Iterable[Mapping[str, Any]], writer: str) -> int | None:
    """The batch of ``writer``'s newest mark among ``commits`` (newest first)."""
    for commit in commits:
        mark = marked_batch(commit.get("userMetadata"))
        if mark is not None and mark[0] == writer:
            return mark[1]
    return None


def applied_version(path: Path, writer: str, legacy: str | None = None) -> int | None:
    """The last micro-batch ``writer`` committed to the table at ``path``, read from its
    log without a JVM, or None when it has written none there. ``legacy``: the id Delta's
    own marks knew the writer by before it had streamsmith's (a streaming query's id,
    which Delta's streaming sink and ``table convert`` record)."""
    if not is_delta(path):
        return None
    batch = newest_mark(commit_infos(path), writer)  # read newest first, up to the mark
    return batch if batch is not None else _txn_version(path, writer, legacy)


def _txn_version(path: Path, *writers: str | None) -> int | None:
    """The batch of the first of ``writers`` found in Delta's own marks (``txnAppId``,
    read by delta-rs): a durable write, or one made before streamsmith's marks."""
    from deltalake import DeltaTable

    table = DeltaTable(str(path), storage_options=storage_options(path))
    for writer in writers:
        version = None if writer is None else table.transaction_version(writer)
        if version is not None:
            return int(version)
    return None


def checkpoint_query_id(checkpoint: Path) -> str | None:
    """The persistent id of the query a checkpoint belongs to (its ``metadata`` file),
    None before the query's first start."""
    metadata = checkpoint / "metadata"
    if not metadata.is_file():
        return None
    first = metadata.read_text(encoding="utf-8").splitlines()[:1]
    return str(json.loads(first[0])["id"]) if first else None


def check_replay(path: Path, writer: str, checkpoint: Path, legacy: str | None = None) -> None:
    """Before a query starts: refuse it when the batch it would replay (logged in its
    checkpoint's offsets, not committed) may have been written to the table at ``path``
    by commits the log no longer holds, so the replay could not tell (see above).
    ``legacy``: as for :func:`applied_version`."""
    pending = _pending_batch(checkpoint)
    if pending is None or not is_delta(path):
        return
    batch_id, started_ms = pending
    commits = list(commit_infos(path))
    if newest_mark(commits, writer) is not None or _txn_version(path, writer, legacy) is not None:
        return  # the writer's newest mark is there: the replay finds what it wrote
    oldest = min(commits, key=lambda c: int(c.get("version", 0)), default=None)
    if oldest is None or int(oldest.get("version", 0)) == 0:
        return  # the whole log is there: no mark means nothing written
    if int(oldest.get("timestamp", 0)) <= started_ms:
        return  # every commit since the batch began is still in the log
    raise UserError(
        f"table {path.name} at {path}: micro-batch {batch_id} of {writer} was interrupted "
        f"(its checkpoint {checkpoint} logs it but not its end), and the table's log no "
        f"longer holds the commits since that batch began (versions before "
        f"{oldest.get('version')} are cleaned up past delta.logRetentionDuration), so "
        "whether it was written cannot be told: rebuild the table from its input with "
        f"`streamsmith run --full-refresh-table {path.name}`, and raise the table's "
        "delta.logRetentionDuration if other writers share it"
    )


def _pending_batch(checkpoint: Path) -> tuple[int, int] | None:
    """(batch id, start time in ms) of the batch a restart of the query at ``checkpoint``
    replays: the newest one its offset log holds and its commit log does not."""

    def ids(folder: str) -> list[int]:
        found = (checkpoint / folder).glob("[0-9]*")
        return sorted(int(f.name) for f in found if f.name.isdigit())

    offsets, commits = ids("offsets"), set(ids("commits"))
    if not offsets or offsets[-1] in commits:
        return None
    lines = (checkpoint / "offsets" / str(offsets[-1])).read_text(encoding="utf-8").splitlines()
    metadata = json.loads(lines[1]) if len(lines) > 1 else {}
    return offsets[-1], int(metadata.get("batchTimestampMs", 0))
