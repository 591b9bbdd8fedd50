"""The Delta Lake table sink: ``<storage_root>/tables/<table>`` as a Delta table.

- ``append``: each micro-batch appended in one commit (``io.lake.start_delta_appends``).
- ``update`` (``keys`` required): each micro-batch is merged into the table by its keys
  (``MERGE``: windowed aggregates and latest-state tables live in the lake).
- ``complete``: each micro-batch replaces the table's content.

- a flow with ``cdc``: its rows are change events, applied to the table by key each
  micro-batch, type 1 or 2 (``streamsmith.io.cdc``).

All four run from ``foreachBatch``, each commit marked with the query and the batch
id (``streamsmith.io.delta_marks``), so a batch replayed after a crash between the Delta
commit and the checkpoint's commit leaves the table as it was (``streamsmith.io.delta``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from pydantic import Field, field_validator, model_validator
from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import StructType

from streamsmith.errors import UserError
from streamsmith.io import cdc, delta
from streamsmith.io.delta import TableSettings
from streamsmith.io.delta_marks import check_replay
from streamsmith.io.sinks.base import (
    ALL_MODES,
    LakeBackedSink,
    LakeTableOptions,
    OutputMode,
    QueryArgs,
    UpgradeRules,
    start_batches,
)
from streamsmith.transforms.cdc import ChangeRules


class DeltaOptions(LakeTableOptions):
    """``table``: the lake table's name; ``partition_by``: its partition columns (or
    ``cluster_by``: its liquid-clustering columns); ``properties``: Delta table
    properties set on it; ``keys``: the columns an update-mode flow merges on (one row per
    key); ``path``: an absolute path (or ``file://`` URI) to keep the table at instead of
    under the storage root, as a Spark Declarative Pipelines Delta sink names one: the
    pipeline does not own such a table, so a full refresh leaves it alone."""

    partition_by: tuple[str, ...] = ()
    cluster_by: tuple[str, ...] = ()
    properties: dict[str, str] = Field(default_factory=dict)
    keys: tuple[str, ...] = ()
    path: str | None = None

    @field_validator("path")
    @classmethod
    def _absolute(cls, path: str | None) -> str | None:
        if path is not None and not Path(path.removeprefix("file://")).is_absolute():
            raise ValueError(f"path {path!r} must be absolute (or a file:// URI)")
        return path

    @model_validator(mode="after")
    def _keys_once(self) -> DeltaOptions:
        if len(set(self.keys)) != len(self.keys):
            raise ValueError(f"keys repeat a column: {list(self.keys)}")
        if self.partition_by and self.cluster_by:
            raise ValueError(
                "a Delta table is partitioned or clustered, not both: "
                "set partition_by or cluster_by"
            )
        return self


class DeltaSink(LakeBackedSink):
    """A Delta table under the storage root: appended, merged by key, or replaced."""

    format: ClassVar[str] = "delta"
    kind: ClassVar[str] = "table"
    Options = DeltaOptions
    output_modes = ALL_MODES
    upgrade = UpgradeRules("file", keeps_schema=True, fixed_location=True, adds_columns=True)
    options: DeltaOptions
    applies_changes = True

    @property
    def partition_by(self) -> tuple[str, ...]:
        return self.options.partition_by

    @property
    def table_settings(self) -> TableSettings:
        return TableSettings(self.options.properties, self.options.cluster_by)

    @property
    def lake_path(self) -> Path:
        path = self.options.path
        return super().lake_path if path is None else Path(path.removeprefix("file://"))

    def reset(self) -> list[str]:
        return [] if self.options.path is not None else super().reset()

    def describe(self) -> str:
        merged = f", merged on {', '.join(self.options.keys)}" if self.options.keys else ""
        cdc = self.context.cdc
        if cdc is not None:
            merged = f", changes applied on {', '.join(cdc.keys)} (scd type {cdc.scd_type})"
        if self.options.cluster_by:
            merged += f", clustered by {', '.join(self.options.cluster_by)}"
        if self.options.properties:
            pairs = sorted(self.options.properties.items())
            merged += f", properties {', '.join(f'{k}={v}' for k, v in pairs)}"
        return f"delta {self.lake_path}{merged}"

    def refuses_mode(self, mode: OutputMode) -> str | None:
        if self.context.cdc is not None:
            if mode != "append":
                return (
                    "a cdc flow's rows are change events, each applied once by key: "
                    f"use output_mode append (not {mode})"
                )
            if self.options.keys:
                return "a cdc flow merges on cdc.keys: remove sink.keys"
        if mode == "update" and not self.options.keys:
            return (
                "an update-mode delta sink merges each row on its keys: set sink.keys "
                "(e.g. keys: [campaign_id, window_start])"
            )
        return None

    def named_columns(self) -> dict[str, tuple[str, ...]]:
        return {
            **super().named_columns(),
            "keys": self.options.keys,
            "cluster_by": self.options.cluster_by,
        }

    def check(self, frame: DataFrame) -> None:
        """Besides the named columns, a cdc flow's rules over the output: the columns
        ``cdc`` names (:meth:`change_rules`, as ``run`` checks them when it creates the
        table) and the expressions it computes from them."""
        super().check(frame)
        rules = self.change_rules(frame)
        if rules is None:
            return
        for option, sql in (("sequence_by", rules.sequence_by),
                            ("apply_as_deletes", rules.apply_as_deletes),
                            ("apply_as_truncates", rules.apply_as_truncates)):  # fmt: skip
            if sql is None:
                continue
            try:
                frame.select(F.expr(sql))
            except (AnalysisException, ParseException) as exc:
                first = next((line for line in str(exc).splitlines() if line.strip()), str(exc))
                raise UserError(
                    f"flow {self.context.flow!r}: cdc.{option} {sql!r} cannot be computed from "
                    f"the flow's output (its columns: {', '.join(frame.columns)}): "
                    f"{first.rstrip(';')}"
                ) from None

    def create(self, spark: SparkSession, frame: DataFrame, at: Path | None = None) -> bool:
        path = at or self.lake_path
        rules = self.change_rules(frame)
        if rules is not None:  # the table a cdc flow keeps, with its state beside it
            cdc.create_tables(spark, path, frame, rules, self.partition_by, self.table_settings)
        else:
            delta.create_table(spark, path, frame.schema, self.partition_by, self.table_settings)
        return True

    def start(self, spark: SparkSession, frame: DataFrame, query: QueryArgs) -> StreamingQuery:
        path = self.lake_path
        self.create(spark, frame)
        app_id = self.app_id(query)
        rules = self.change_rules(frame)
        if rules is not None or query.output_mode in ("update", "complete"):
            for table in cdc.written_tables(path, rules) if rules is not None else [path]:
                check_replay(table, app_id, query.checkpoint)
        if rules is not None:
            where = f"flow {self.context.flow!r}"

            def apply(batch: DataFrame, batch_id: int) -> None:
                cdc.apply_changes(batch, path, rules, app_id, batch_id, where)

            return start_batches(frame, apply, query)
        if query.output_mode == "update":
            keys = self.options.keys

            def merge(batch: DataFrame, batch_id: int) -> None:
                delta.merge_batch(batch, path, keys, app_id, batch_id)

            return start_batches(frame, merge, query)
        if query.output_mode == "complete":

            def overwrite(batch: DataFrame, batch_id: int) -> None:
                delta.overwrite_batch(batch, path, app_id, batch_id, self.partition_by)

            return start_batches(frame, overwrite, query)
        return self.start_file_sink(frame, query)

    def change_rules(self, frame: DataFrame) -> ChangeRules | None:
        """The flow's ``cdc`` rules over the columns of ``frame``; None without ``cdc``."""
        spec = self.context.cdc
        if spec is None:
            return None
        rules = ChangeRules(
            spec.keys,
            spec.sequence_by,
            spec.apply_as_deletes,
            spec.except_columns,
            spec.scd_type,
            spec.track_history_columns,
            ignore_null_updates=spec.ignore_null_updates,
            apply_as_truncates=spec.apply_as_truncates,
        )
        try:
            return rules.for_columns(frame.columns)
        except ValueError as exc:
            raise UserError(f"flow {self.context.flow!r}: {exc}") from None

    def write_backfill(self, frame: DataFrame, path: Path, *, append: bool = False) -> None:
        rules = self.change_rules(frame)
        if rules is None:
            super().write_backfill(frame, path, append=append)
            return
        if append:
            raise UserError(
                f"flow {self.context.flow!r}: table {path.name} takes several flows' changes, "
                "and a backfill builds a change table from one flow's: not supported yet"
            )
        app_id = f"streamsmith:{self.context.app}:{self.context.flow}:backfill"
        cdc.backfill(frame, path, rules, app_id, self.partition_by)

    def read_back(self, spark: SparkSession, schema: Callable[[], StructType]) -> DataFrame:
        return spark.read.format("delta").load(str(self.lake_path))


SINK = DeltaSink
