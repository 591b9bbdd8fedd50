"""The PostgreSQL sink: a table kept exactly once, upserted by ``key``.

Each micro-batch is one transaction with a ledger row of its batch id
(``streamsmith.io.postgres.sink``), so a replay after a crash writes nothing twice. The
server is the spec's ``postgres`` block: its DSN, else ``$<dsn_env>``, else the embedded
server (``streamsmith db start``); the DSN is a secret, resolved only when a query starts.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import ClassVar

from pydantic import Field
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import StructType

from streamsmith.io.postgres.dsn import dsn_origin, dsn_secrets, resolve_dsn
from streamsmith.io.postgres.sink import (
    PostgresTarget,
    check_reset,
    read_target,
    reset_target,
    servable,
    setup_target,
    write_batch,
)
from streamsmith.io.sinks.base import (
    ALL_MODES,
    QueryArgs,
    Sink,
    SinkOptions,
    UpgradeRules,
    start_batches,
)

# Set by Spark on the thread running a micro-batch: the query's id, kept in its checkpoint.
QUERY_ID_PROPERTY = "sql.streaming.queryId"


class PostgresTableOptions(SinkOptions):
    """``table``: the table in the spec's ``postgres.db_schema``; ``key``: the columns a
    result row is identified by (its primary key; upserts match on it)."""

    table: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    key: tuple[str, ...] = ()


class PostgresTableSink(Sink):
    """A PostgreSQL table, exactly once per batch through a ledger."""

    format: ClassVar[str] = "postgres"
    kind: ClassVar[str] = "postgres"
    writes_table = True
    Options = PostgresTableOptions
    output_modes = ALL_MODES
    upgrade = UpgradeRules("foreach", keeps_schema=True)
    options: PostgresTableOptions

    @property
    def target(self) -> str:
        return self.options.table

    def named_columns(self) -> dict[str, tuple[str, ...]]:
        return {"key": self.options.key}

    @cached_property
    def dsn(self) -> str:
        """The server's connection string (a secret), resolved once, on first use."""
        return resolve_dsn(self.context.spec)

    def table(self, output_mode: str) -> PostgresTarget:
        """The table as the writer sees it; the ledger knows it by the query's name."""
        return PostgresTarget(
            dsn=self.dsn,
            table=self.options.table,
            key=self.options.key,
            output_mode=output_mode,
            sink=self.context.query_name,
            schema=self.context.spec.postgres.db_schema,
        )

    def describe(self) -> str:
        spec = self.context.spec
        key = f" (key {', '.join(self.options.key)})" if self.options.key else ""
        return f"postgres table {spec.postgres.db_schema}.{self.target}{key} on {dsn_origin(spec)}"

    def secrets(self) -> list[str]:
        return dsn_secrets(self.dsn)

    def start(self, spark: SparkSession, frame: DataFrame, query: QueryArgs) -> StreamingQuery:
        """The table and ledger are created (or checked) before the query starts, so a
        schema mismatch is reported at once instead of failing the first batch."""
        target = self.table(query.output_mode)
        setup_target(target, servable(frame).schema)

        def write(batch: DataFrame, batch_id: int) -> None:
            query_id = batch.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
            write_batch(target, batch, batch_id, query_id or query.name)

        return start_batches(frame, write, query)

    def check_reset(self) -> None:
        check_reset(self.table("append"))

    def reset(self) -> list[str]:
        """Drop the table (only one streamsmith created) and its ledger entries."""
        target = self.table("append")
        reset_target(target)
        return [f"postgres table {target.schema}.{target.table}"]

    def read_back(self, spark: SparkSession, schema: Callable[[], StructType]) -> DataFrame:
        columns = schema()
        rows = read_target(self.table("append"), columns.fieldNames())
        return spark.createDataFrame(rows, columns)


SINK = PostgresTableSink
