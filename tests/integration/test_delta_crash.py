"""A Delta merge, overwrite or append killed after its Delta commit and before the
checkpoint records the batch: on restart the batch replays, the table stays as it was
(no second commit for that batch), and the run goes on to the same totals as one
uninterrupted. (Appends of a whole flow, through Delta's streaming sink and the
quarantine's marked appends, are killed mid-batch in ``test_crash_recovery.py``.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import delta_merge_child
import pytest
from crashing import batch_ids, spawn
from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("delta_merge_child.py")
FILES = 4


def write_input(folder: Path) -> dict[str, int]:
    folder.mkdir(parents=True)
    totals: dict[str, int] = {}
    for index in range(FILES):
        rows = input_rows(index)
        for row in rows:
            totals[row["key"]] = totals.get(row["key"], 0) + row["amount"]
        lines = "".join(json.dumps(row) + "\n" for row in rows)
        (folder / f"part-{index}.json").write_text(lines)
    return totals


def input_rows(index: int) -> list[dict[str, Any]]:
    return [{"key": f"k{(index + i) % 3}", "amount": index * 10 + i} for i in range(5)]


@pytest.mark.parametrize(
    "mode",
    [
        # make test kills the MERGE; make test-deep also the overwrite and the append
        "update",
        pytest.param("complete", marks=pytest.mark.deep),
        pytest.param("append", marks=pytest.mark.deep),
    ],
)
def test_sigkill_between_the_delta_commit_and_the_checkpoint_replays_as_a_no_op(
    spark: SparkSession, tmp_path: Path, mode: str
) -> None:
    totals = write_input(tmp_path / "in")
    table = tmp_path / "totals"
    command = [sys.executable, str(CHILD), str(tmp_path / "in"), str(tmp_path / "cp"), str(table),
               mode]  # fmt: skip

    killed = spawn([*command, "1"])
    _, stderr = killed.communicate(timeout=300)
    assert killed.returncode == -9, stderr[-3000:]
    assert batch_ids(tmp_path / "cp/offsets") == {0, 1}
    assert batch_ids(tmp_path / "cp/commits") == {0}  # batch 1 is in Delta, not committed
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
    before = max(row.version for row in history)

    # The restart, in this process's session: the checkpoint, not the process, is the point.
    restarted = delta_merge_child.start(spark, *command[2:], "-1")
    restarted.awaitTermination(300)
    assert restarted.exception() is None and not restarted.isActive

    assert batch_ids(tmp_path / "cp/commits") == set(range(FILES))
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
    writes = [row for row in history if row.version > 0]  # version 0 creates the table
    # One commit per batch: the replayed batch 1 wrote nothing the second time.
    assert len(writes) == FILES, [(r.version, r.operation) for r in history]
    assert max(row.version for row in history) == before + FILES - 2
    rows = spark.read.format("delta").load(str(table)).collect()
    if mode == "append":  # every input row once
        expected = sorted((r["key"], r["amount"]) for i in range(FILES) for r in input_rows(i))
        assert sorted((row.key, row.amount) for row in rows) == expected
    else:
        assert {row.key: row.total for row in rows} == totals
