"""The memory sink: a table in the running driver, for interactive SQL.

Spark's memory sink cannot resume from a checkpoint, so each run starts a fresh
checkpoint and rebuilds the table from the source.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from pydantic import Field
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import StructType

from streamsmith.io.sinks.base import ALL_MODES, QueryArgs, Sink, SinkOptions, UpgradeRules
from streamsmith.object_store import remove_tree


class MemoryTableOptions(SinkOptions):
    """``table``: the name SQL in the same driver queries the result by."""

    table: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")


class MemoryTableSink(Sink):
    """A table in the driver's memory, rebuilt every run."""

    format: ClassVar[str] = "memory"
    kind: ClassVar[str] = "memory"
    writes_table = True
    Options = MemoryTableOptions
    output_modes = ALL_MODES
    upgrade = UpgradeRules("rebuilt")
    options: MemoryTableOptions

    @property
    def target(self) -> str:
        return self.options.table

    @property
    def spark_name(self) -> str:
        """Spark's memory sink names its table after the query."""
        return self.options.table

    def describe(self) -> str:
        return f"memory table {self.target}"

    def start(self, spark: SparkSession, frame: DataFrame, query: QueryArgs) -> StreamingQuery:
        if query.checkpoint.exists():
            remove_tree(query.checkpoint)
        return (
            frame.writeStream.queryName(self.target)
            .format("memory")
            .outputMode(query.output_mode)
            .option("checkpointLocation", str(query.checkpoint))
            .trigger(**query.trigger.spark_kwargs())
            .start()
        )

    def read_back(self, spark: SparkSession, schema: Callable[[], StructType]) -> DataFrame:
        return spark.table(self.target)


SINK = MemoryTableSink
