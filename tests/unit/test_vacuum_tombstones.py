"""Vacuum finds the files a table replaced through the log's records of them, which a log
checkpoint drops once the table's ``delta.deletedFileRetentionDuration`` has passed."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from streamsmith.runtime import maintenance
from streamsmith.runtime.maintenance import TableMaintenance

HOUR_MS = 3_600_000


def test_a_checkpoint_after_the_retention_leaves_vacuum_the_replaced_files(
    tmp_path: Path,
) -> None:
    table = tmp_path / "t"
    for value in range(3):
        write_deltalake(str(table), pa.table({"x": [value]}), mode="append")
    task = TableMaintenance(table="t", path=table, flow="f", query="a.f", optimize="0 * * * *",
                            vacuum="30 * * * *", retain_hours=1)  # fmt: skip
    optimized = maintenance.maintain(task, ("optimize", "vacuum"), tmp_path, lambda e: e, "now")
    assert [e["files_removed"] for e in optimized] == [3, 0]  # removed just now: kept
    assert optimized[1]["properties_set"] == {
        "delta.deletedFileRetentionDuration": "interval 2 hours"
    }
    replaced = {f.name for f in table.glob("*.parquet")} - {
        Path(uri).name for uri in DeltaTable(str(table)).file_uris()
    }
    assert len(replaced) == 3

    # 90 minutes on: past the 1-hour retention; a stream's commits wrote a log checkpoint.
    for log in (table / "_delta_log").glob("*.json"):
        actions = [json.loads(line) for line in log.read_text().splitlines()]
        for action in actions:
            if "remove" in action:
                action["remove"]["deletionTimestamp"] -= int(1.5 * HOUR_MS)
        log.write_text("".join(json.dumps(action) + "\n" for action in actions))
    DeltaTable(str(table)).create_checkpoint()

    vacuumed = maintenance.maintain(task, ("vacuum",), tmp_path, lambda e: e, "now")
    assert vacuumed[0]["files_removed"] == 3
    assert not replaced & {f.name for f in table.glob("*.parquet")}
    assert sorted(DeltaTable(str(table)).to_pyarrow_table().column("x").to_pylist()) == [0, 1, 2]
