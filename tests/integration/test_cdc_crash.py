"""Change data capture exactly once, through the CLI: runs killed between a batch's two
Delta commits (the table, then its tombstones or change log) and after both (before the
checkpoint records the batch) restart on their checkpoint to the tables of the whole
feed, one commit per batch in each table; ``streamsmith backfill`` gives the same."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from crashing import batch_ids, spawn
from pyspark.sql import SparkSession
from test_cli import streamsmith

from change_feeds import SPEC, change_feed, scd1, scd2, split_into_files
from streamsmith.io import cdc

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("cdc_child.py")
FILES = 4


@pytest.mark.parametrize(
    ("flow", "side", "reference"),
    [
        # make test-deep (over a minute each): make test kills a MERGE between its Delta
        # commit and the checkpoint in test_delta_crash.py, and replays a CDC batch in
        # tests/streaming/test_cdc.py
        pytest.param("customers", cdc.TOMBSTONES, scd1, marks=pytest.mark.deep),
        pytest.param("customer_history", cdc.CHANGE_LOG, scd2, marks=pytest.mark.deep),
    ],
)
def test_kills_between_and_after_the_delta_commits_replay_to_the_same_tables(
    spark: SparkSession, tmp_path: Path, flow: str, side: str, reference: object
) -> None:
    feed = change_feed(seed=21, events=60)
    spec = {**SPEC, "spark": {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": 2}}}
    spec_file = tmp_path / "streamsmith.yml"
    spec_file.write_text(yaml.safe_dump(spec))
    split_into_files(feed, tmp_path / "data/input/changes", [15, 30, 45])
    checkpoint = tmp_path / f"data/checkpoints/crm/{flow}"
    table = tmp_path / f"data/tables/{flow}"

    def run(fault: str, batch: int) -> None:
        child = spawn([sys.executable, str(CHILD), str(spec_file), flow, fault, str(batch)])
        _, stderr = child.communicate(timeout=1500)
        assert child.returncode == (0 if fault == "none" else -9), stderr[-3000:]

    def merges(path: Path) -> int:
        history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
        return sum(1 for row in history if row.operation == "MERGE")

    run("between", 1)
    assert batch_ids(checkpoint / "commits") == {0}
    assert (merges(table), merges(table / side)) == (2, 1)  # batch 1 is half applied
    run("after", 2)
    assert batch_ids(checkpoint / "commits") == {0, 1}
    assert (merges(table), merges(table / side)) == (3, 3)
    run("none", -1)

    assert batch_ids(checkpoint / "commits") == set(range(FILES))
    assert (merges(table), merges(table / side)) == (FILES, FILES)  # replays wrote nothing
    got = {tuple(row) for row in spark.read.format("delta").load(str(table)).collect()}
    assert got == reference(feed)  # type: ignore[operator]

    done = streamsmith("backfill", str(spec_file), cwd=tmp_path, timeout=1500)
    assert done.returncode == 0, done.stderr
    backfilled = tmp_path / f"data/backfill/{flow}"
    assert {tuple(r) for r in spark.read.format("delta").load(str(backfilled)).collect()} == got
