"""Tables written from ``foreachBatch``: a replayed micro-batch replaces its own files."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from streamsmith.io.delta_marks import marked_batch
from streamsmith.io.lake import prepare_table, read_table, replace_batch_files, write_batch

SCHEMA = "n int, day string"


def test_a_replayed_batch_replaces_its_files_and_leaves_the_others(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "table"

    def write(rows: list[tuple[int, str]], batch_id: int) -> int:
        return replace_batch_files(spark.createDataFrame(rows, SCHEMA), table, batch_id, ("day",))

    assert write([(1, "mon"), (2, "tue")], 0) == 2
    assert write([(3, "mon"), (4, "wed"), (5, "wed")], 1) == 3
    assert write([(6, "mon")], 1) == 1  # batch 1 again, as after a crash mid-batch
    assert write([], 2) == 0

    rows = spark.read.parquet(str(table)).collect()
    assert sorted((r.n, r.day) for r in rows) == [(1, "mon"), (2, "tue"), (6, "mon")]
    # Batch 1's first attempt is gone, with the partition only it had.
    assert sorted(p.name for p in table.iterdir()) == ["day=mon", "day=tue"]


def test_a_replayed_batch_of_a_delta_table_commits_nothing_and_counts_its_rows(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "table"
    prepare_table(spark, table, spark.createDataFrame([], SCHEMA).schema, ("day",), "delta")

    def write(rows: list[tuple[int, str]], batch_id: int) -> int:
        frame = spark.createDataFrame(rows, SCHEMA)
        return write_batch(frame, table, batch_id, ("day",), app_id="side-query")

    assert write([(1, "mon"), (2, "tue")], 0) == 2
    assert write([(3, "mon"), (4, "wed")], 1) == 2
    # Batch 1 replayed after a crash between its Delta commit and the checkpoint's: the
    # same input, read again (its rows are counted) but not committed a second time.
    assert write([(3, "mon"), (4, "wed")], 1) == 2
    assert write([], 2) == 0

    rows = read_table(spark, table).collect()
    assert sorted((r.n, r.day) for r in rows) == [(1, "mon"), (2, "tue"), (3, "mon"), (4, "wed")]
    history = sorted(
        spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect(), key=lambda r: r.version
    )
    # batches 0 and 1 once each, each commit marked with its batch; the empty batch 2
    # adds nothing and commits nothing (a replay of it would write nothing either)
    assert [row.operation for row in history] == ["CREATE TABLE", "WRITE", "WRITE"]
    assert [marked_batch(row.userMetadata) for row in history] == [
        None,
        ("side-query", 0),
        ("side-query", 1),
    ]
