"""Turn a Parquet lake table written by Spark's file sink into a Delta table, in place.

Tables written before Delta became the lake's format are folders of Parquet files with
the file sink's commit log (``_spark_metadata``). Delta's ``CONVERT TO DELTA`` reads that
log when it is there, so the files of a batch killed before its commit stay out of the
new table, as they stayed out of every reader before. The files are not rewritten.

The stream that wrote the table resumes on its checkpoint with a Delta sink, which skips
a batch its writer already committed: by streamsmith's marks, or, for batches written
before them, by Delta's ``SetTransaction`` keyed by the query's id
(``io.delta_marks.applied_version``). The conversion records the last batch the file
sink committed that way, so a batch the file sink committed but the checkpoint did not
(a crash between the two) is recognised on replay rather than written twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from streamsmith.errors import UserError
from streamsmith.io.lake import saved_schema
from streamsmith.io.lake_paths import COMMIT_LOG, is_delta, is_table

_PARTITION = re.compile(r"^([^_.=][^=]*)=")
_BATCH_FILE = re.compile(r"^(\d+)(\.compact)?$")


@dataclass(frozen=True)
class Converted:
    """What a conversion did: the files the table now holds, its partition columns, and
    the file sink's last committed batch (None when it had no log)."""

    files: int
    partition_by: tuple[str, ...]
    last_batch: int | None


def partition_columns(path: Path) -> tuple[str, ...]:
    """The partition columns of a Parquet table, from its ``name=value`` folders."""
    names: list[str] = []
    folder = path
    while True:
        nested = sorted(
            child for child in folder.iterdir() if child.is_dir() and _PARTITION.match(child.name)
        )
        if not nested:
            return tuple(names)
        match = _PARTITION.match(nested[0].name)
        assert match is not None
        names.append(match.group(1))
        folder = nested[0]


def last_sink_batch(path: Path) -> int | None:
    """The newest batch id in the file sink's commit log, or None without a log."""
    log = path / COMMIT_LOG
    ids = [
        int(found.group(1))
        for entry in (log.iterdir() if log.is_dir() else ())
        if (found := _BATCH_FILE.match(entry.name))
    ]
    return max(ids) if ids else None


def convert_to_delta(spark: SparkSession, path: Path) -> Converted:
    """``CONVERT TO DELTA`` the Parquet table at ``path`` (committed files only)."""
    if is_delta(path):
        raise UserError(f"{path} is a Delta table already")
    if not is_table(path):
        raise UserError(f"{path} holds no table to convert")
    partition_by = partition_columns(path)
    clause = ""
    if partition_by:
        # The schema streamsmith saved beside the data has the partition columns' real
        # types; inferred from folder names, a boolean would come back as a string.
        schema: StructType = saved_schema(path) or spark.read.parquet(str(path)).schema
        types = {field.name: field.dataType.simpleString() for field in schema.fields}
        clause = " PARTITIONED BY (" + ", ".join(
            f"{_quoted(name)} {types[name]}" for name in partition_by
        ) + ")"  # fmt: skip
    spark.sql(f"CONVERT TO DELTA parquet.{_quoted(str(path))}{clause}")
    from delta.tables import DeltaTable

    files = DeltaTable.forPath(spark, str(path)).detail().first()
    return Converted(int(files["numFiles"]) if files else 0, partition_by, last_sink_batch(path))


def record_streamed_batch(spark: SparkSession, path: Path, query_id: str, batch_id: int) -> None:
    """Record in the Delta log that the streaming query ``query_id`` wrote batch
    ``batch_id`` (an empty append carrying Delta's transaction mark), so its Delta sink
    skips that batch if the checkpoint replays it."""
    empty = spark.createDataFrame([], spark.read.format("delta").load(str(path)).schema)
    (
        empty.write.format("delta")
        .mode("append")
        .option("txnAppId", query_id)
        .option("txnVersion", str(batch_id))
        .save(str(path))
    )


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
