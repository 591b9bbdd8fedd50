"""Vacuum deletes what no version within the retention uses, wherever it came from: files
a version removed, files no version mentions (a batch killed before its commit), old
change-feed files, and on a local disk the checksum files and empty partition folders
left behind; never a file being written or one a stream has not read."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import DeltaError

from streamsmith.io import delta_maintenance
from streamsmith.runtime import maintenance
from streamsmith.runtime.maintenance import TableMaintenance

HOUR = 3600


def _age(table: Path, hours: float) -> None:
    """Move the table ``hours`` into the past: its files' and folders' times and its
    removal records."""
    then = time.time() - hours * HOUR
    for entry in table.rglob("*"):
        if "_delta_log" not in entry.parts:
            os.utime(entry, (then, then))
    for log in (table / "_delta_log").glob("*.json"):
        actions = [json.loads(line) for line in log.read_text().splitlines()]
        for action in actions:
            if "remove" in action:
                action["remove"]["deletionTimestamp"] -= int(hours * HOUR * 1000)
        log.write_text("".join(json.dumps(action) + "\n" for action in actions))


def _files(table: Path) -> set[str]:
    return {
        str(f.relative_to(table))
        for f in table.rglob("*")
        if f.is_file() and "_delta_log" not in f.parts
    }


def test_vacuum_deletes_orphans_and_read_change_files_but_keeps_unread_and_new_ones(
    tmp_path: Path,
) -> None:
    table = tmp_path / "t"
    feed = {"delta.enableChangeDataFeed": "true"}
    write_deltalake(str(table), pa.table({"x": [1, 2, 3]}), configuration=feed)  # version 0
    DeltaTable(str(table)).delete("x = 2")  # 1: a change file
    DeltaTable(str(table)).update({"x": "x + 10"}, predicate="x = 3")  # 2: another
    live = {Path(uri).name for uri in DeltaTable(str(table)).file_uris()}
    (first_change,) = delta_maintenance.change_files(table, 1) - (
        delta_maintenance.change_files(table, 2)
    )
    (second_change,) = delta_maintenance.change_files(table, 2)
    replaced = {f.name for f in table.glob("*.parquet")} - live
    assert len(replaced) == 2 and first_change.startswith("_change_data/")
    # A batch killed before its commit left a file (and Hadoop's checksum beside it).
    (table / "part-killed.parquet").write_bytes(b"never committed")
    (table / ".part-killed.parquet.crc").write_bytes(b"crc")
    # Not Parquet: not the table's to delete (a deletion vector is a .bin file no add names).
    (table / "deletion_vector_0d1e.bin").write_bytes(b"rows deleted")
    _age(table, 3)
    (table / "part-being-written.parquet").write_bytes(b"commit to come")  # written now

    # A stream reading the change feed has not read version 2.
    kept_for_stream = delta_maintenance.vacuum(table, 1, keep_from=2)
    assert sorted(kept_for_stream.files) == sorted({*replaced, first_change, "part-killed.parquet"})
    assert kept_for_stream.checksums == 1
    assert _files(table) == {
        *live, second_change, "part-being-written.parquet", "deletion_vector_0d1e.bin"
    }  # fmt: skip
    assert sorted(DeltaTable(str(table)).to_pyarrow_table().column("x").to_pylist()) == [1, 13]

    # It has read on: the change file goes; the file being written still stays.
    read_on = delta_maintenance.vacuum(table, 1)
    assert read_on.files == [second_change]
    assert _files(table) == {*live, "part-being-written.parquet", "deletion_vector_0d1e.bin"}


def test_a_dry_run_deletes_nothing_and_an_enforced_one_refuses_a_short_retention(
    tmp_path: Path,
) -> None:
    table = tmp_path / "t"
    write_deltalake(str(table), pa.table({"x": [1]}))
    (table / "part-killed.parquet").write_bytes(b"never committed")
    _age(table, 3)
    before = _files(table)
    assert delta_maintenance.vacuum(table, 1, dry_run=True).files == ["part-killed.parquet"]
    assert _files(table) == before
    with pytest.raises(DeltaError, match="retention"):  # Delta's default: 7 days
        delta_maintenance.vacuum(table, 1, enforce=True)
    assert _files(table) == before


def test_the_maintenance_vacuum_removes_partition_folders_left_empty_for_the_retention(
    tmp_path: Path,
) -> None:
    table = tmp_path / "late"
    for batch in range(3):
        write_deltalake(str(table), pa.table({"batch_id": [batch], "x": [batch]}),
                        partition_by=["batch_id"], mode="append")  # fmt: skip
    DeltaTable(str(table)).delete("batch_id <= 1")  # expiry, a partition at a time
    (live,) = (table / "batch_id=2").glob("*.parquet")
    checksum = live.with_name(f".{live.name}.crc")
    checksum.write_bytes(b"crc")  # Hadoop's, beside a file Spark wrote: stays with it
    _age(table, 3)
    task = TableMaintenance(table="late", path=table, flow="f", query="a.f", optimize=None,
                            vacuum="30 * * * *", retain_hours=1)  # fmt: skip

    (first,) = maintenance.maintain(task, ("vacuum",), tmp_path, lambda e: e, "now")
    assert first["files_removed"] == 2 and first["folders_removed"] == 0  # emptied just now
    assert sorted(f.name for f in table.iterdir() if f.is_dir()) == [
        "_delta_log", "batch_id=0", "batch_id=1", "batch_id=2"
    ]  # fmt: skip

    _age(table, 3)  # an hour on, nothing wrote into them
    (table / "batch_id=3").mkdir()  # a writer about to put its file here
    (second,) = maintenance.maintain(task, ("vacuum",), tmp_path, lambda e: e, "now")
    assert (second["files_removed"], second["folders_removed"]) == (0, 2)
    assert second["message"] == (
        "0 files deleted, unused for 1 hours (and 2 empty partition folders)"
    )
    assert sorted(f.name for f in table.iterdir() if f.is_dir()) == [
        "_delta_log", "batch_id=2", "batch_id=3"
    ]  # fmt: skip
    assert DeltaTable(str(table)).to_pyarrow_table().column("x").to_pylist() == [2]
    assert checksum.exists()
