"""The marks that say which micro-batches a query wrote to a Delta table, read back
without a JVM, on tables written by delta-rs (the same log format Spark's Delta writes)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from streamsmith.errors import UserError
from streamsmith.io.delta_marks import (
    applied_version,
    batch_mark,
    check_replay,
    checkpoint_query_id,
    marked_batch,
)

WRITER = "streamsmith:app:app.totals"


def commit(table: Path, metadata: str | None = None, txn: tuple[str, int] | None = None) -> None:
    properties = CommitProperties(
        custom_metadata=None if metadata is None else {"userMetadata": metadata},
        app_transactions=None if txn is None else [Transaction(txn[0], txn[1])],
    )
    write_deltalake(table, pa.table({"n": [1]}), mode="append", commit_properties=properties)


def test_a_mark_names_its_writer_and_batch_and_nothing_else_reads_as_one() -> None:
    assert marked_batch(batch_mark(WRITER, 7)) == (WRITER, 7)
    for other in (None, "", "a user's note", '{"streamsmith": "x"}', "streamsmith {", 3,
                  '{"streamsmith": {"writer": "w", "batch": "7"}}'):  # fmt: skip
        assert marked_batch(other) is None


def test_the_newest_mark_of_the_writer_is_its_last_batch(tmp_path: Path) -> None:
    table = tmp_path / "t"
    assert applied_version(table, WRITER) is None  # no table yet
    commit(table)
    assert applied_version(table, WRITER) is None  # a table it never wrote
    for batch in range(3):
        commit(table, batch_mark(WRITER, batch))
        commit(table, batch_mark("streamsmith:app:other", batch + 10))  # another flow
        commit(table, "a user's note")
    assert applied_version(table, WRITER) == 2
    assert applied_version(table, "streamsmith:app:other") == 12


def test_a_mark_behind_many_other_commits_is_found(tmp_path: Path) -> None:
    table = tmp_path / "t"
    commit(table, batch_mark(WRITER, 4))
    for _ in range(18):  # maintenance and other writers in between
        commit(table)
    assert applied_version(table, WRITER) == 4


def test_a_table_written_before_the_marks_answers_by_delta_s_txn_version(
    tmp_path: Path,
) -> None:
    table = tmp_path / "t"
    commit(table, txn=(WRITER, 5))
    commit(table)
    assert applied_version(table, WRITER) == 5
    commit(table, batch_mark(WRITER, 6))  # the marks take over
    assert applied_version(table, WRITER) == 6


def test_batches_delta_s_streaming_sink_wrote_count_under_the_query_s_id(tmp_path: Path) -> None:
    """A flow's appends went through Delta's streaming sink before, which marked them
    with the streaming query's id (as ``table convert`` does): a replay of its last
    batch after the upgrade finds it written; its marks then take over."""
    table, query_id = tmp_path / "t", "0b7c2a6e-5d1f-4c39-9a63-3c1f7f1d2e40"
    commit(table, txn=(query_id, 8))
    assert applied_version(table, WRITER) is None
    assert applied_version(table, WRITER, legacy=query_id) == 8
    cleaned = tmp_path / "cleaned"  # the query's txn outlives the log's cleanup: it starts
    commit(cleaned, txn=(query_id, 8))
    cleaned_log(cleaned, 0)
    check_replay(cleaned, WRITER, pending_checkpoint(tmp_path / "cp", 9, 0), legacy=query_id)
    commit(table, batch_mark(WRITER, 9))
    assert applied_version(table, WRITER, legacy=query_id) == 9


def pending_checkpoint(folder: Path, batch: int, started_ms: int) -> Path:
    """A checkpoint whose batch ``batch`` is logged and not committed (a kill mid-batch)."""
    (folder / "offsets").mkdir(parents=True)
    (folder / "commits").mkdir()
    for done in range(batch):
        (folder / "commits" / str(done)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    for planned in range(batch + 1):
        metadata = {"batchWatermarkMs": 0, "batchTimestampMs": started_ms}
        (folder / "offsets" / str(planned)).write_text(f"v1\n{json.dumps(metadata)}\n{{}}")
    return folder


def cleaned_log(table: Path, writer_batches: int) -> None:
    """A table ``WRITER`` wrote, whose log entries before a checkpoint are cleaned up."""
    for batch in range(writer_batches):
        commit(table, batch_mark(WRITER, batch))
    for _ in range(3):
        commit(table)  # another writer
    DeltaTable(table).create_checkpoint()
    for entry in sorted((table / "_delta_log").glob("*.json"))[: writer_batches + 1]:
        entry.unlink()
    commit(table)


def test_a_replay_whose_writer_s_marks_are_cleaned_up_is_refused(tmp_path: Path) -> None:
    table = tmp_path / "t"
    started = int(time.time() * 1000) - 60_000  # the batch began before the retained log
    cleaned_log(table, 3)
    checkpoint = pending_checkpoint(tmp_path / "cp", 3, started)
    with pytest.raises(UserError, match=r"micro-batch 3 of .* cannot be told.*--full-refresh"):
        check_replay(table, WRITER, checkpoint)


def test_a_replay_the_log_can_answer_starts(tmp_path: Path) -> None:
    table = tmp_path / "t"
    cleaned_log(table, 3)
    later = int(time.time() * 1000) + 60_000  # the batch began after the oldest commit kept
    check_replay(table, WRITER, pending_checkpoint(tmp_path / "cp1", 3, later))
    commit(table, batch_mark(WRITER, 3))  # a retained mark answers
    check_replay(table, WRITER, pending_checkpoint(tmp_path / "cp2", 4, 0))
    whole = tmp_path / "whole"  # a log kept whole: no mark means nothing written
    commit(whole)
    check_replay(whole, WRITER, pending_checkpoint(tmp_path / "cp3", 4, 0))
    # nothing to replay: a committed last batch, or no checkpoint yet
    done = pending_checkpoint(tmp_path / "cp4", 3, 0)
    (done / "commits" / "3").write_text("v1\n{}")
    check_replay(table, "streamsmith:app:gone", done)
    check_replay(table, "streamsmith:app:gone", tmp_path / "none")


def test_a_checkpoint_s_query_id_is_in_its_metadata_file(tmp_path: Path) -> None:
    assert checkpoint_query_id(tmp_path) is None  # before the query's first start
    (tmp_path / "metadata").write_text('{"id":"0b7c2a6e-5d1f-4c39-9a63-3c1f7f1d2e40"}\n')
    assert checkpoint_query_id(tmp_path) == "0b7c2a6e-5d1f-4c39-9a63-3c1f7f1d2e40"
