"""Tables written from ``foreachBatch``: a replayed micro-batch replaces its own files; the
query runs without the constraints Spark would derive for each batch."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from streamsmith.config import Trigger
from streamsmith.io.delta_marks import marked_batch
from streamsmith.io.lake import (
    prepare_table,
    read_table,
    replace_batch_files,
    start_foreach_batch,
    write_batch,
)
from streamsmith.spark.conf import CONSTRAINTS

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


def test_a_foreach_batch_query_derives_no_constraints_and_leaves_the_session_s_setting(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Spark's ForeachBatchSink derives the plan's constraints again each batch, which on
    the cloudtrail app's projection of many CASE WHEN columns never finished batch 0: a
    foreachBatch query runs without them, and the session it was started from keeps its
    own setting."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in/a.jsonl").write_text('{"n": 1, "day": "mon"}\n{"n": 2, "day": "tue"}\n')
    frame = spark.readStream.schema(SCHEMA).json(str(tmp_path / "in")).where("n > 0")
    before = spark.conf.get(CONSTRAINTS)
    seen: list[tuple[str | None, int]] = []

    def write(batch: DataFrame, _batch_id: int) -> None:
        seen.append((batch.sparkSession.conf.get(CONSTRAINTS), batch.count()))

    query = start_foreach_batch(
        frame, write, name="constraints", checkpoint=tmp_path / "cp",
        trigger=Trigger("available-now"),
    )  # fmt: skip
    assert spark.conf.get(CONSTRAINTS) == before == "true"
    query.awaitTermination()
    assert seen == [("false", 2)]


def test_a_table_delta_rs_creates_is_appended_to_without_rebuilding_its_state(
    spark: SparkSession, tmp_path: Path
) -> None:
    """delta-rs writes no checksum file; streamsmith writes version 0's, so Delta's first
    append runs its one write job and none to rebuild the table's state."""
    table = tmp_path / "table"
    prepare_table(spark, table, spark.createDataFrame([], SCHEMA).schema, ("day",), "delta")
    assert (table / "_delta_log" / f"{0:020d}.crc").is_file()
    context = spark.sparkContext
    context.setJobGroup("first-append", "a table's first append")
    try:
        frame = spark.createDataFrame([(1, "mon")], SCHEMA)
        assert write_batch(frame, table, 0, ("day",), app_id="first") == 1
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert len(context.statusTracker().getJobIdsForGroup("first-append")) == 1
    assert [(r.n, r.day) for r in read_table(spark, table).collect()] == [(1, "mon")]
    assert (table / "_delta_log" / f"{1:020d}.crc").is_file()
