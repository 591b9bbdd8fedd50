"""The lake under ``<storage_root>/tables``: Delta tables, or Parquet ones.

A Delta table (the default) has a transaction log: readers see committed versions only,
so the files of a batch killed before its commit are never read, whatever reads them.
Streaming queries write each batch from ``foreachBatch``, its commit marked with the
query and the batch id, so a replayed batch is skipped (``streamsmith.io.delta``).

A Parquet table (``format: parquet``, and tables written before Delta was the default)
goes through Spark's file sink: each micro-batch's files are listed in the table's
``_spark_metadata`` commit log only once the batch commits, and a batch replayed after a
crash rewrites the same entry. Readers that go through Spark (``spark.read.parquet``,
``streamsmith query``) read that log and so never see files of a failed batch; tools
that list the folder directly (pyarrow, DuckDB) can. Parquet tables a ``foreachBatch``
writes have no commit log: each batch's files carry its id and a replay replaces them
(:func:`replace_batch_files`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import StructType

from streamsmith.config import Trigger
from streamsmith.errors import UserError
from streamsmith.io import delta
from streamsmith.io.delta_marks import check_replay, checkpoint_query_id
from streamsmith.io.lake_paths import (
    BACKFILL_DIR,
    CHECKPOINTS_DIR,
    COMMIT_LOG,
    MODEL_FILE,
    MODELS_DIR,
    SCHEMA_FILE,
    TABLES_DIR,
    backfill_path,
    is_delta,
    is_table,
    lake_tables,
    model_path,
    table_path,
)
from streamsmith.spark.conf import start_foreach_batch_writer

# The paths live in io.lake_paths (no Spark there); importers of io.lake still find them.
__all__ = [
    "BACKFILL_DIR",
    "CHECKPOINTS_DIR",
    "COMMIT_LOG",
    "MODELS_DIR",
    "MODEL_FILE",
    "SCHEMA_FILE",
    "TABLES_DIR",
    "TableFormat",
    "backfill_path",
    "is_table",
    "kept_format",
    "lake_tables",
    "model_path",
    "prepare_table",
    "read_table",
    "register_lake_views",
    "replace_batch_files",
    "replace_static_table",
    "save_schema",
    "saved_schema",
    "start_delta_appends",
    "start_foreach_batch",
    "start_table_stream",
    "table_path",
    "write_batch",
    "write_table",
]

TableFormat = Literal["delta", "parquet"]


def start_table_stream(
    frame: DataFrame,
    *,
    name: str,
    path: Path,
    checkpoint: Path,
    trigger: Trigger,
    partition_by: Sequence[str] = (),
    output_mode: str = "append",
    table_format: TableFormat,
    app_id: str,
) -> StreamingQuery:
    """Start a named streaming query appending ``frame`` to a table: a Delta table's
    batches appended from ``foreachBatch`` with the marks of ``app_id``
    (:func:`start_delta_appends`), or Spark's Parquet file sink."""
    prepare_table(frame.sparkSession, path, frame.schema, partition_by, table_format)
    if table_format == "delta":
        if output_mode != "append":
            raise ValueError(f"a Delta table stream appends (not {output_mode})")
        return start_delta_appends(
            frame, name=name, path=path, checkpoint=checkpoint, trigger=trigger,
            partition_by=partition_by, app_id=app_id,
        )  # fmt: skip
    writer = (
        frame.writeStream.queryName(name)
        .format(table_format)
        .outputMode(output_mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger.spark_kwargs())
    )
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    return writer.start(str(path))


def start_delta_appends(
    frame: DataFrame,
    *,
    name: str,
    path: Path,
    checkpoint: Path,
    trigger: Trigger,
    partition_by: Sequence[str],
    app_id: str,
) -> StreamingQuery:
    """Start a named query appending each micro-batch of ``frame`` to the Delta table at
    ``path`` once (``io.delta.append_batch``, marked with ``app_id``).

    Not Delta's streaming sink: it reads the query's last batch from the table's state,
    which Delta 4.4 rebuilds with Spark jobs after every commit, about two thirds of a
    small batch's time (``benchmarks/delta_batch_marks.py``). Batches that sink wrote
    before (Delta's ``SetTransaction`` under the query's id, which ``table convert``
    records too) are still recognised when the checkpoint replays one."""
    legacy = checkpoint_query_id(checkpoint)
    check_replay(path, app_id, checkpoint, legacy)

    def append(batch: DataFrame, batch_id: int) -> None:
        delta.append_batch(batch, path, app_id, batch_id, partition_by, legacy=legacy)

    return start_foreach_batch(frame, append, name=name, checkpoint=checkpoint, trigger=trigger)


def start_foreach_batch(
    frame: DataFrame,
    write: Callable[[DataFrame, int], None],
    *,
    name: str,
    checkpoint: Path,
    trigger: Trigger,
    output_mode: str = "append",
) -> StreamingQuery:
    """Start a named query handing each micro-batch and its id to ``write``."""
    writer = (
        frame.writeStream.queryName(name)
        .outputMode(output_mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger.spark_kwargs())
        .foreachBatch(write)
    )
    return start_foreach_batch_writer(frame.sparkSession, writer)


def prepare_table(
    spark: SparkSession,
    path: Path,
    schema: StructType,
    partition_by: Sequence[str],
    table_format: TableFormat,
) -> None:
    """Make the table queryable before its first batch: an empty Delta table, or a
    Parquet folder with its saved schema."""
    if table_format == "delta":
        delta.create_table(spark, path, schema, partition_by)
    else:
        save_schema(path, schema)


def kept_format(path: Path, new: TableFormat) -> TableFormat:
    """The format of the table at ``path``: its own when it exists (a lake keeps each
    table's format), ``new`` for a table yet to be written."""
    if is_table(path):
        return "delta" if is_delta(path) else "parquet"
    return new


def write_batch(
    frame: DataFrame,
    path: Path,
    batch_id: int,
    partition_by: Sequence[str] = (),
    *,
    app_id: str,
) -> int:
    """Write ``frame`` as micro-batch ``batch_id`` of the table a ``foreachBatch`` of
    ``app_id`` keeps at ``path`` (made by :func:`prepare_table`), exactly once; returns its
    rows. Delta: an append committed with the batch's idempotent-write marks; Parquet:
    the batch's files, replaced on a replay."""
    if is_delta(path):
        return delta.append_batch(frame, path, app_id, batch_id, partition_by)
    return replace_batch_files(frame, path, batch_id, partition_by)


def replace_batch_files(
    frame: DataFrame, path: Path, batch_id: int, partition_by: Sequence[str] = ()
) -> int:
    """Write ``frame`` as micro-batch ``batch_id``'s part of the table at ``path``; returns
    its rows.

    For tables written from ``foreachBatch``, without Spark's commit log: the files are
    written to a hidden staging folder and moved in under names starting with the batch
    id, after the files of an earlier attempt at the same batch are removed, so a replay
    replaces the batch instead of adding it again. A reader listing the table while a
    batch moves in can see part of that batch.
    """
    staging = path / f"_staging-{batch_id}"
    shutil.rmtree(staging, ignore_errors=True)
    counted = Observation(f"rows-{path.name}-{batch_id}")
    writer = frame.observe(counted, F.count(F.lit(1)).alias("rows")).write.format("parquet")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.save(str(staging))
    prefix = f"batch-{batch_id}-"
    for earlier in list(path.rglob(f"{prefix}*")):
        if staging not in earlier.parents:
            earlier.unlink()
            if earlier.parent != path and not any(earlier.parent.iterdir()):
                earlier.parent.rmdir()  # no empty partitions left behind
    for written in staging.rglob("*.parquet"):
        target = path / written.relative_to(staging).parent / f"{prefix}{written.name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        written.replace(target)
    shutil.rmtree(staging)
    return int(counted.get.get("rows", 0))


def write_table(
    frame: DataFrame,
    path: Path,
    partition_by: Sequence[str] = (),
    table_format: TableFormat = "delta",
    *,
    append: bool = False,
    settings: delta.TableSettings = delta.NO_SETTINGS,
) -> None:
    """Replace a table with a batch DataFrame (backfill); with ``append``, add it (a
    further flow's backfill into the table). ``settings``: a Delta table's declared
    properties and clustering."""
    if table_format == "delta":
        delta.overwrite_table(frame, path, partition_by, append=append, settings=settings)
        return
    writer = frame.write.mode("append" if append else "overwrite").format("parquet")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.save(str(path))
    save_schema(path, frame.schema)


def replace_static_table(path: Path, rows: Sequence[Sequence[Any]], schema: StructType) -> None:
    """Write a small lookup table (e.g. ``device_locations``) as one Parquet file, no Spark.

    The new version is built beside the old one and swapped in with two renames, so a
    stream joining with it sees the old or the new table; a reader listing the folder at
    the exact moment of the swap may fail once and succeed on retry.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    columns: list[Sequence[Any]] = (
        list(zip(*rows, strict=True)) if rows else [() for _ in schema.fields]
    )
    table = pa.table(
        [
            pa.array(list(values), type=field.type)
            for values, field in zip(columns, arrow_schema, strict=True)
        ],
        schema=arrow_schema,
    )
    staging = path.with_name(f".{path.name}.new")
    retired = path.with_name(f".{path.name}.old")
    for leftover in (staging, retired):
        if leftover.exists():
            shutil.rmtree(leftover)
    staging.mkdir(parents=True)
    pq.write_table(table, staging / "part-00000.parquet")
    save_schema(staging, schema)
    if path.exists():
        path.rename(retired)
    staging.rename(path)
    if retired.exists():
        shutil.rmtree(retired)


def save_schema(path: Path, schema: StructType) -> None:
    """Record a table's schema beside its data (written atomically)."""
    path.mkdir(parents=True, exist_ok=True)
    staging = path / f".{SCHEMA_FILE}.tmp"
    staging.write_text(schema.json(), encoding="utf-8")
    staging.replace(path / SCHEMA_FILE)


def saved_schema(path: Path) -> StructType | None:
    """The schema recorded by :func:`save_schema`, if any."""
    file = path / SCHEMA_FILE
    if not file.is_file():
        return None
    return StructType.fromJson(json.loads(file.read_text(encoding="utf-8")))


def register_lake_views(spark: SparkSession, root: Path) -> dict[str, Path]:
    """Register every lake table as a temporary view (read through its commit log)."""
    tables = lake_tables(root)
    for view, path in tables.items():
        read_table(spark, path).createOrReplaceTempView(view)
    return tables


def read_table(spark: SparkSession, path: Path) -> DataFrame:
    """A lake table as a batch DataFrame, through its commit log and saved schema."""
    if not is_table(path):
        raise UserError(f"table {path.name} does not exist at {path}: create it first")
    if is_delta(path):
        return spark.read.format("delta").load(str(path))
    reader = spark.read
    schema = saved_schema(path)
    if schema is not None:
        reader = reader.schema(schema)
    return reader.parquet(str(path))
