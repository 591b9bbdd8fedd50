"""Plain Parquet lake tables (``format: parquet``): ``<storage_root>/tables/<table>``
through Spark's file sink, for users who want files any tool reads (Delta is the default).

Exactly once: each micro-batch's files enter the table's commit log (``_spark_metadata``)
only when the batch commits, and a replayed batch rewrites the same entry.
"""

from __future__ import annotations

from typing import ClassVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from streamsmith.errors import UserError
from streamsmith.io.lake import TableFormat
from streamsmith.io.lake_paths import is_delta
from streamsmith.io.sinks.base import LakeBackedSink, LakeTableOptions, QueryArgs, UpgradeRules


class ParquetOptions(LakeTableOptions):
    """``table``: the lake table's name; ``partition_by``: its partition columns."""

    partition_by: tuple[str, ...] = ()


class ParquetSink(LakeBackedSink):
    """Parquet files under the storage root, appended batch by batch."""

    format: ClassVar[str] = "parquet"
    kind: ClassVar[str] = "table"
    Options = ParquetOptions
    output_modes = ("append",)  # Spark's file sink appends only
    upgrade = UpgradeRules("file", keeps_schema=True, fixed_location=True, adds_columns=True)
    options: ParquetOptions

    @property
    def partition_by(self) -> tuple[str, ...]:
        return self.options.partition_by

    @property
    def table_format(self) -> TableFormat:
        return "parquet"

    def start(self, spark: SparkSession, frame: DataFrame, query: QueryArgs) -> StreamingQuery:
        if is_delta(self.lake_path):  # Parquet files beside a Delta log: Delta never sees them
            raise UserError(
                f"{self.lake_path} is a Delta table now (`streamsmith table convert`?): "
                "set format: delta on this sink; its checkpoint resumes"
            )
        return self.start_file_sink(frame, query)


SINK = ParquetSink
