"""Exactly-once micro-batches into PostgreSQL: upserts plus a ledger, in one transaction.

Each micro-batch is written by the driver in a single transaction that also inserts
``(sink, query id, batch id)`` into the ledger table ``streamsmith_ledger``. Spark replays
a batch after a failure with the same id and the same rows, so the replay finds its
ledger row and writes nothing: the table never double-counts, and a failure anywhere
before the commit leaves nothing half-written.

- ``update`` (and ``append`` with a key): ``INSERT ... ON CONFLICT (key) DO UPDATE``; the
  table has the key as its primary key.
- ``append`` without a key: plain inserts.
- ``complete``: the table's content is replaced (``DELETE`` + ``INSERT``), atomically for
  readers, who see the old result or the new one.

A table streamsmith creates is marked as its own (``COMMENT ON TABLE``, which goes with
the table: dropped and recreated by someone else, it is no longer marked). Only a marked
table is emptied by ``complete`` mode or dropped by ``--full-refresh``: a table of the
same name made by someone else is refused, never deleted. Nothing here needs more than
the ``CREATE`` privilege on the schema (and on the database, only if the schema is new).

Rows travel through the driver (``COPY`` into a temporary table, then one upsert
statement), which suits what is served to a database: aggregates and alerts, thousands
of rows a batch rather than millions. Struct, array and map columns are stored as
``jsonb``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from streamsmith.errors import UserError
from streamsmith.io.postgres.dsn import mask_dsn

LEDGER_TABLE = "streamsmith_ledger"
MARK = "streamsmith: created for sink "  # the comment on a table streamsmith created
_BATCH_ROWS = 10_000


@dataclass(frozen=True)
class PostgresTarget:
    """A table a streaming query keeps in PostgreSQL.

    ``sink`` names the writer in the ledger (the query name); ``dsn`` is a libpq
    connection string and is never printed.
    """

    dsn: str
    table: str
    key: tuple[str, ...]
    output_mode: str
    sink: str
    schema: str = "public"

    def __repr__(self) -> str:
        return f"PostgresTarget({self.schema}.{self.table}, key={self.key}, {self.output_mode})"

    @property
    def qualified(self) -> sql.Composed:
        return sql.SQL("{}.{}").format(sql.Identifier(self.schema), sql.Identifier(self.table))


def pg_type(data_type: DataType) -> str:
    """The PostgreSQL column type that holds a Spark type without loss."""
    simple: list[tuple[type[DataType], str]] = [
        (StringType, "text"),
        (LongType, "bigint"),
        (IntegerType, "integer"),
        (ShortType, "smallint"),
        (ByteType, "smallint"),
        (DoubleType, "double precision"),
        (FloatType, "real"),
        (BooleanType, "boolean"),
        (TimestampType, "timestamptz"),
        (TimestampNTZType, "timestamp"),
        (DateType, "date"),
        (BinaryType, "bytea"),
    ]
    for spark_type, name in simple:
        if isinstance(data_type, spark_type):
            return name
    if isinstance(data_type, DecimalType):
        return f"numeric({data_type.precision},{data_type.scale})"
    if isinstance(data_type, StructType | ArrayType | MapType):
        return "jsonb"
    raise UserError(f"no PostgreSQL type for Spark type {data_type.simpleString()}")


def servable(frame: DataFrame) -> DataFrame:
    """``frame`` with struct, array and map columns as JSON text (stored as ``jsonb``)."""
    nested = (StructType, ArrayType, MapType)
    return frame.select(
        *(
            F.to_json(field.name).alias(field.name)
            if isinstance(field.dataType, nested)
            else F.col(field.name)
            for field in frame.schema.fields
        )
    )


def check_target(target: PostgresTarget, schema: StructType) -> None:
    """Validate a target against the output schema before any connection is made."""
    columns = schema.fieldNames()
    missing = [key for key in target.key if key not in columns]
    if missing:
        raise UserError(
            f"postgres sink {target.table}: key column(s) {', '.join(missing)} are not in the "
            f"flow's output (columns: {', '.join(columns)}); fix sink.key"
        )
    if target.output_mode == "update" and not target.key:
        raise UserError(
            f"postgres sink {target.table}: update mode needs sink.key, the columns that "
            f"identify a result row (e.g. the group-by columns); output columns: "
            f"{', '.join(columns)}"
        )


_SETUP_LOCK = 0x53_54_52_4D  # the advisory lock sink setups take turns on


def setup_target(target: PostgresTarget, schema: StructType) -> None:
    """Create the table (key as primary key) and the ledger if missing; check an existing
    table has every output column and a unique key, so the first batch cannot fail on
    them halfway through a run."""
    check_target(target, schema)
    columns = [
        sql.SQL("{} {}").format(sql.Identifier(f.name), sql.SQL(pg_type(f.dataType)))
        for f in schema.fields
    ]
    if target.key:
        columns.append(
            sql.SQL("PRIMARY KEY ({})").format(sql.SQL(", ").join(map(sql.Identifier, target.key)))
        )
    with _connect(target) as conn:
        # A run starts its queries together: two sinks creating the schema or the ledger
        # at once would race (CREATE ... IF NOT EXISTS is not safe under concurrency in
        # PostgreSQL: a duplicate key in pg_type), so setups take turns until commit.
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))
        schema_found = conn.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", (target.schema,)
        ).fetchone()
        if not schema_found:  # CREATE SCHEMA IF NOT EXISTS needs CREATE on the database
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(target.schema)))
        if _table_mark(conn, target) is None:  # absent: created here, and marked as ours
            conn.execute(
                sql.SQL("CREATE TABLE {} ({})").format(
                    target.qualified, sql.SQL(", ").join(columns)
                )
            )
            conn.execute(
                sql.SQL("COMMENT ON TABLE {} IS {}").format(
                    target.qualified, sql.Literal(MARK + target.sink)
                )
            )
        elif target.output_mode == "complete" and not _ours(conn, target):
            raise UserError(
                f"postgres table {target.schema}.{target.table} {_owner(conn, target)}, "
                "and complete mode would empty it at every batch: choose another "
                "sink.table, or drop the table to let streamsmith create it"
            )
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {}.{} (sink text NOT NULL, query_id text NOT NULL, "
                "batch_id bigint NOT NULL, rows bigint NOT NULL, "
                "committed_at timestamptz NOT NULL DEFAULT now(), "
                "PRIMARY KEY (sink, query_id, batch_id))"
            ).format(sql.Identifier(target.schema), sql.Identifier(LEDGER_TABLE))
        )
        existing = _table_columns(conn, target)
        absent = [name for name in schema.fieldNames() if name not in existing]
        if absent:
            raise UserError(
                f"postgres table {target.schema}.{target.table} exists without column(s) "
                f"{', '.join(absent)} of the flow's output: drop or migrate it, or choose "
                "another sink.table"
            )
        if target.key and not _has_unique_key(conn, target):
            raise UserError(
                f"postgres table {target.schema}.{target.table} exists without a primary key "
                f"or unique index on ({', '.join(target.key)}), which upserts need: add one "
                "or drop the table to let streamsmith create it"
            )


def write_batch(target: PostgresTarget, batch: DataFrame, batch_id: int, query_id: str) -> bool:
    """Write one micro-batch exactly once; False when the ledger shows it was already written.

    A replayed batch is still consumed (a ``noop`` write): Spark fails the stateful
    commit of a batch whose output was never computed.
    """
    frame = servable(batch)
    with _connect(target) as conn:
        ledger = sql.SQL("{}.{}").format(
            sql.Identifier(target.schema), sql.Identifier(LEDGER_TABLE)
        )
        # Serialise writers of this sink, so two runs on one checkpoint cannot both write.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (target.sink,))
        done = conn.execute(
            sql.SQL("SELECT 1 FROM {} WHERE sink = %s AND query_id = %s AND batch_id = %s").format(
                ledger
            ),
            (target.sink, query_id, batch_id),
        ).fetchone()
        if done:
            frame.write.format("noop").mode("overwrite").save()
            return False
        rows = _stage(conn, target, frame)
        conn.execute(_merge_statement(target, frame.columns))
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (sink, query_id, batch_id, rows) VALUES (%s, %s, %s, %s)"
            ).format(ledger),
            (target.sink, query_id, batch_id, rows),
        )
    return True


def check_reset(target: PostgresTarget) -> None:
    """Refuse (before anything is removed) to reset a table streamsmith did not create."""
    with _connect(target) as conn:
        if _table_mark(conn, target) is not None and not _ours(conn, target):
            raise UserError(
                f"postgres table {target.schema}.{target.table} {_owner(conn, target)}, "
                "so --full-refresh will not drop it: drop it yourself if its rows may go, "
                "or point sink.table at another table"
            )


def reset_target(target: PostgresTarget) -> None:
    """Drop the table (only if streamsmith created it) and forget the sink's ledger
    (``--full-refresh``)."""
    check_reset(target)
    with _connect(target) as conn:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(target.qualified))
        ledger = sql.SQL("{}.{}").format(
            sql.Identifier(target.schema), sql.Identifier(LEDGER_TABLE)
        )
        exists = conn.execute("SELECT to_regclass(%s)", (ledger.as_string(conn),))
        row = exists.fetchone()
        if row and row[0]:
            conn.execute(
                sql.SQL("DELETE FROM {}.{} WHERE sink = %s").format(
                    sql.Identifier(target.schema), sql.Identifier(LEDGER_TABLE)
                ),
                (target.sink,),
            )


def read_target(target: PostgresTarget, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    """Every row of the table, with ``columns`` in that order (tests read sinks back)."""
    names = sql.SQL(", ").join(map(sql.Identifier, columns))
    with _connect(target) as conn:
        query = sql.SQL("SELECT {} FROM {}").format(names, target.qualified)
        return [tuple(row) for row in conn.execute(query).fetchall()]


def _connect(target: PostgresTarget) -> psycopg.Connection[Any]:
    try:
        return psycopg.connect(target.dsn, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise psycopg.OperationalError(
            f"cannot connect to PostgreSQL for sink {target.schema}.{target.table}: "
            f"{mask_dsn(str(exc))}"
        ) from None


def _stage(conn: psycopg.Connection[Any], target: PostgresTarget, frame: DataFrame) -> int:
    """COPY the batch into a temporary table dropped at commit; returns the row count."""
    conn.execute(
        sql.SQL(
            "CREATE TEMP TABLE _streamsmith_stage (LIKE {} INCLUDING DEFAULTS) ON COMMIT DROP"
        ).format(target.qualified)
    )
    columns = sql.SQL(", ").join(map(sql.Identifier, frame.columns))
    rows = 0
    statement = sql.SQL("COPY _streamsmith_stage ({}) FROM STDIN").format(columns)
    with conn.cursor().copy(statement) as copy:
        for row in _rows(frame):
            copy.write_row(row)
            rows += 1
    return rows


def _rows(frame: DataFrame) -> Iterator[tuple[Any, ...]]:
    """The batch's rows as tuples, collected to the driver as Arrow in one job."""
    table = frame.toArrow()
    for chunk in table.to_batches(max_chunksize=_BATCH_ROWS):
        yield from zip(*(column.to_pylist() for column in chunk.columns), strict=True)


def _merge_statement(target: PostgresTarget, columns: Sequence[str]) -> sql.Composed:
    names = sql.SQL(", ").join(map(sql.Identifier, columns))
    stage = sql.Identifier("_streamsmith_stage")
    if target.output_mode == "complete":
        return sql.SQL("DELETE FROM {}; INSERT INTO {} ({}) SELECT {} FROM {}").format(
            target.qualified, target.qualified, names, names, stage
        )
    if not target.key:
        return sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {}").format(
            target.qualified, names, names, stage
        )
    values = [c for c in columns if c not in target.key]
    action = (
        sql.SQL("DO UPDATE SET {}").format(
            sql.SQL(", ").join(
                sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(c), sql.Identifier(c))
                for c in values
            )
        )
        if values
        else sql.SQL("DO NOTHING")
    )
    return sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} ON CONFLICT ({}) {}").format(
        target.qualified,
        names,
        names,
        stage,
        sql.SQL(", ").join(map(sql.Identifier, target.key)),
        action,
    )


def _table_mark(conn: psycopg.Connection[Any], target: PostgresTarget) -> str | None:
    """The table's comment ('' when it has none), or None when there is no such table."""
    row = conn.execute(
        "SELECT coalesce(obj_description(c.oid, 'pg_class'), '') FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
        (target.schema, target.table),
    ).fetchone()
    return None if row is None else str(row[0])


def _ours(conn: psycopg.Connection[Any], target: PostgresTarget) -> bool:
    """Whether this sink created the table: it carries the mark naming ``target.sink``
    exactly (another app's or flow's table of the same name is not ours to drop or
    empty)."""
    return _table_mark(conn, target) == MARK + target.sink


def _owner(conn: psycopg.Connection[Any], target: PostgresTarget) -> str:
    """Who made the table, for a refusal: another streamsmith sink, or not streamsmith."""
    mark = _table_mark(conn, target) or ""
    if mark.startswith(MARK):
        return f"was created for sink {mark.removeprefix(MARK)}, not {target.sink}"
    return "was not created by streamsmith"


def _table_columns(conn: psycopg.Connection[Any], target: PostgresTarget) -> set[str]:
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = %s AND table_name = %s",
        (target.schema, target.table),
    ).fetchall()
    return {str(row[0]) for row in rows}


def _has_unique_key(conn: psycopg.Connection[Any], target: PostgresTarget) -> bool:
    rows = conn.execute(
        "SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_index i "
        "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
        "WHERE i.indrelid = to_regclass(%s) AND i.indisunique GROUP BY i.indexrelid",
        (target.qualified.as_string(conn),),
    ).fetchall()
    wanted = sorted(target.key)
    return any(sorted(row[0]) == wanted for row in rows)
