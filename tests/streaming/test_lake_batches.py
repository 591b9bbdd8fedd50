"""Tables written from ``foreachBatch``: a replayed micro-batch replaces its own files."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from streamsmith.io.lake import replace_batch_files

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
