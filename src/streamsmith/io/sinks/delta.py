"""The Delta Lake table sink: ``<storage_root>/tables/<table>`` as a Delta table.

- ``append``: Delta's streaming sink; each batch's files enter the table's transaction log
  with the query's id and batch id, and a replayed batch is skipped.
- ``update`` (``keys`` required): each micro-batch is merged into the table by its keys
  (``MERGE``: windowed aggregates and latest-state tables live in the lake).
- ``complete``: each micro-batch replaces the table's content.

The last two run from ``foreachBatch`` with Delta's idempotent-write marks (the query and
the batch id in the same commit as the data), so a batch replayed after a crash between
the Delta commit and the checkpoint's commit leaves the table as it was
(``streamsmith.io.delta``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from pydantic import model_validator
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import StructType

from streamsmith.io import delta
from streamsmith.io.sinks.base import (
    ALL_MODES,
    LakeBackedSink,
    LakeTableOptions,
    OutputMode,
    QueryArgs,
    UpgradeRules,
    start_batches,
)


class DeltaOptions(LakeTableOptions):
    """``table``: the lake table's name; ``partition_by``: its partition columns;
    ``keys``: the columns an update-mode flow merges on (one row per key)."""

    partition_by: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _keys_once(self) -> DeltaOptions:
        if len(set(self.keys)) != len(self.keys):
            raise ValueError(f"keys repeat a column: {list(self.keys)}")
        return self


class DeltaSink(LakeBackedSink):
    """A Delta table under the storage root: appended, merged by key, or replaced."""

    format: ClassVar[str] = "delta"
    kind: ClassVar[str] = "table"
    Options = DeltaOptions
    output_modes = ALL_MODES
    upgrade = UpgradeRules("file", keeps_schema=True, fixed_location=True, adds_columns=True)
    options: DeltaOptions

    @property
    def partition_by(self) -> tuple[str, ...]:
        return self.options.partition_by

    def describe(self) -> str:
        merged = f", merged on {', '.join(self.options.keys)}" if self.options.keys else ""
        return f"delta {self.lake_path}{merged}"

    def refuses_mode(self, mode: OutputMode) -> str | None:
        if mode == "update" and not self.options.keys:
            return (
                "an update-mode delta sink merges each row on its keys: set sink.keys "
                "(e.g. keys: [campaign_id, window_start])"
            )
        return None

    def start(self, spark: SparkSession, frame: DataFrame, query: QueryArgs) -> StreamingQuery:
        path = self.lake_path
        delta.create_table(spark, path, frame.schema, self.partition_by)
        app_id = f"streamsmith:{self.context.app}:{query.name}"
        if query.output_mode == "update":
            keys = self.options.keys

            def merge(batch: DataFrame, batch_id: int) -> None:
                delta.merge_batch(batch, path, keys, app_id, batch_id)

            return start_batches(frame, merge, query)
        if query.output_mode == "complete":

            def overwrite(batch: DataFrame, batch_id: int) -> None:
                delta.overwrite_batch(batch, path, app_id, batch_id, self.partition_by)

            return start_batches(frame, overwrite, query)
        writer = (
            frame.writeStream.queryName(query.name)
            .format("delta")
            .outputMode("append")
            .option("mergeSchema", "true")  # columns added by schema evolution
            .option("checkpointLocation", str(query.checkpoint))
            .trigger(**query.trigger.spark_kwargs())
        )
        if self.partition_by:
            writer = writer.partitionBy(*self.partition_by)
        return writer.start(str(path))

    def read_back(self, spark: SparkSession, schema: Callable[[], StructType]) -> DataFrame:
        return spark.read.format("delta").load(str(self.lake_path))


SINK = DeltaSink
