"""The PostgreSQL sink against a real server: upserts, the batch ledger, complete mode."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from streamsmith.errors import UserError
from streamsmith.io.postgres.sink import PostgresTarget, reset_target, setup_target, write_batch

COUNTS = "action string, window_start timestamp, count long"


def at(hour: int) -> datetime:
    return datetime(2026, 11, 20, hour, tzinfo=UTC)


def rows(dsn: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return [tuple(row) for row in conn.execute(query).fetchall()]


def target(
    dsn: str, mode: str = "update", key: tuple[str, ...] = ("action", "window_start")
) -> PostgresTarget:
    return PostgresTarget(
        dsn=dsn, table="action counts", key=key, output_mode=mode, sink="t.counts"
    )


def frame(spark: SparkSession, *data: tuple[Any, ...], schema: str = COUNTS) -> DataFrame:
    return spark.createDataFrame(list(data), schema)


def test_upserts_by_key_and_a_replayed_batch_writes_nothing(
    spark: SparkSession, pg_dsn: str
) -> None:
    sink = target(pg_dsn)
    first = frame(spark, ("open", at(10), 3), ("close", at(10), 1))
    setup_target(sink, first.schema)

    assert write_batch(sink, first, 0, "query-1")
    assert write_batch(sink, frame(spark, ("open", at(10), 5), ("open", at(11), 1)), 1, "query-1")
    # Spark replays batch 1 after a crash: the ledger makes it a no-op, even if the rows
    # were (wrongly) different.
    assert not write_batch(sink, frame(spark, ("open", at(10), 99)), 1, "query-1")

    table = 'SELECT action, window_start, count FROM "action counts" ORDER BY 1, 2'
    assert rows(pg_dsn, table) == [
        ("close", at(10), 1),
        ("open", at(10), 5),
        ("open", at(11), 1),
    ]
    assert rows(
        pg_dsn, "SELECT sink, query_id, batch_id, rows FROM streamsmith_ledger ORDER BY 3"
    ) == [
        ("t.counts", "query-1", 0, 2),
        ("t.counts", "query-1", 1, 2),
    ]


def test_complete_mode_replaces_the_table_atomically(spark: SparkSession, pg_dsn: str) -> None:
    sink = target(pg_dsn, mode="complete", key=())
    setup_target(sink, frame(spark).schema)
    write_batch(sink, frame(spark, ("open", at(10), 3), ("close", at(10), 1)), 0, "q")
    write_batch(sink, frame(spark, ("open", at(10), 4)), 1, "q")

    assert rows(pg_dsn, 'SELECT action, count FROM "action counts"') == [("open", 4)]


def test_nested_columns_are_stored_as_jsonb(spark: SparkSession, pg_dsn: str) -> None:
    data = spark.sql(
        "SELECT 'a' AS id, named_struct('start', timestamp'2026-11-20 10:00:00', 'n', 2) AS w, "
        "array(1, 2) AS xs"
    )
    sink = PostgresTarget(dsn=pg_dsn, table="nested", key=("id",), output_mode="update", sink="n")
    setup_target(sink, data.schema)
    write_batch(sink, data, 0, "q")

    assert rows(pg_dsn, "SELECT w->>'n', jsonb_array_length(xs) FROM nested") == [("2", 2)]
    types = rows(
        pg_dsn,
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_name = 'nested' ORDER BY ordinal_position",
    )
    assert types == [("id", "text"), ("w", "jsonb"), ("xs", "jsonb")]


def test_a_failing_batch_writes_nothing_and_is_retried_whole(
    spark: SparkSession, pg_dsn: str
) -> None:
    sink = target(pg_dsn)
    setup_target(sink, frame(spark).schema)
    bad = frame(spark, ("open", at(10), 1), (None, at(10), 2))  # a null key violates the PK

    with pytest.raises(psycopg.errors.NotNullViolation):
        write_batch(sink, bad, 0, "q")

    assert rows(pg_dsn, 'SELECT count(*) FROM "action counts"') == [(0,)]
    assert rows(pg_dsn, "SELECT count(*) FROM streamsmith_ledger") == [(0,)]
    assert write_batch(sink, frame(spark, ("open", at(10), 1)), 0, "q")  # the retry lands


def test_an_existing_table_must_fit_the_output(spark: SparkSession, pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        conn.execute('CREATE TABLE "action counts" (action text, count bigint)')
    with pytest.raises(UserError, match=r"exists without column\(s\) window_start"):
        setup_target(target(pg_dsn), frame(spark).schema)
    with psycopg.connect(pg_dsn) as conn:
        conn.execute('ALTER TABLE "action counts" ADD COLUMN window_start timestamptz')
    with pytest.raises(UserError, match="without a primary key or unique index on"):
        setup_target(target(pg_dsn), frame(spark).schema)


def test_update_mode_needs_a_key_that_is_in_the_output(spark: SparkSession, pg_dsn: str) -> None:
    with pytest.raises(UserError, match="update mode needs sink.key"):
        setup_target(target(pg_dsn, key=()), frame(spark).schema)
    with pytest.raises(UserError, match=r"key column\(s\) hour are not in the flow's output"):
        setup_target(target(pg_dsn, key=("hour",)), frame(spark).schema)


def test_full_refresh_drops_the_table_and_forgets_the_ledger(
    spark: SparkSession, pg_dsn: str
) -> None:
    sink = target(pg_dsn)
    setup_target(sink, frame(spark).schema)
    write_batch(sink, frame(spark, ("open", at(10), 1)), 0, "q")

    reset_target(sink)

    assert rows(pg_dsn, "SELECT to_regclass('\"action counts\"')") == [(None,)]
    assert rows(pg_dsn, "SELECT count(*) FROM streamsmith_ledger") == [(0,)]


def test_connection_errors_never_show_the_password(spark: SparkSession, pg_dsn: str) -> None:
    wrong = pg_dsn.replace("password=", "password=not-the-") if "password=" in pg_dsn else pg_dsn
    wrong = wrong + " password=wr0ng-secret" if "password=" not in pg_dsn else wrong
    with pytest.raises(psycopg.OperationalError) as failure:
        setup_target(target(wrong), frame(spark).schema)
    assert "cannot connect to PostgreSQL for sink public.action counts" in str(failure.value)
    assert "not-the-" not in str(failure.value) and "wr0ng-secret" not in str(failure.value)


def test_full_refresh_refuses_a_table_streamsmith_did_not_create(
    spark: SparkSession, pg_dsn: str
) -> None:
    """A table of the sink's name that someone else made is never dropped, nor is one
    streamsmith made that was dropped and recreated by someone else (the mark is gone)."""
    with psycopg.connect(pg_dsn) as conn:
        conn.execute('CREATE TABLE "action counts" (action text, keep text)')
        conn.execute("""INSERT INTO "action counts" VALUES ('open', 'theirs')""")
    with pytest.raises(UserError, match=r"not created by streamsmith, so --full-refresh will"):
        reset_target(target(pg_dsn))
    assert rows(pg_dsn, 'SELECT keep FROM "action counts"') == [("theirs",)]

    with psycopg.connect(pg_dsn) as conn:
        conn.execute('DROP TABLE "action counts"')
    setup_target(target(pg_dsn), frame(spark).schema)  # created, so ours to drop
    reset_target(target(pg_dsn))
    assert rows(pg_dsn, "SELECT to_regclass('\"action counts\"')") == [(None,)]


def test_complete_mode_refuses_to_empty_a_table_streamsmith_did_not_create(
    spark: SparkSession, pg_dsn: str
) -> None:
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(
            'CREATE TABLE "action counts" (action text, window_start timestamptz, count bigint)'
        )
        conn.execute("""INSERT INTO "action counts" VALUES ('theirs', now(), 7)""")
    sink = target(pg_dsn, "complete", key=())
    with pytest.raises(UserError, match=r"not created by streamsmith, and complete mode would"):
        setup_target(sink, frame(spark).schema)
    assert rows(pg_dsn, 'SELECT action, count FROM "action counts"') == [("theirs", 7)]
    setup_target(target(pg_dsn, "append", key=()), frame(spark).schema)  # appends may go in


def test_a_sink_needs_no_superuser_only_create_on_its_schema(
    spark: SparkSession, pg_dsn: str
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS sink_writer")
        conn.execute("CREATE ROLE sink_writer LOGIN PASSWORD 'writer-pw' NOSUPERUSER")
        conn.execute("REVOKE CREATE ON DATABASE " + conn.info.dbname + " FROM PUBLIC")
        conn.execute("GRANT USAGE, CREATE ON SCHEMA public TO sink_writer")
    writer = f"{pg_dsn} user=sink_writer password=writer-pw"
    sink = target(writer, "complete", key=())
    setup_target(sink, frame(spark).schema)
    assert write_batch(sink, frame(spark, ("open", at(10), 1)), 0, "q")
    assert rows(writer, 'SELECT action, count FROM "action counts"') == [("open", 1)]
    reset_target(sink)
    assert rows(writer, "SELECT to_regclass('\"action counts\"')") == [(None,)]


def test_a_table_another_sink_created_is_neither_dropped_nor_emptied(pg_dsn: str) -> None:
    """Ownership is the exact sink: a table marked as another app's (``otherapp.someflow``)
    is not this sink's to drop (``--full-refresh``) or to empty (``complete``)."""
    schema = StructType(
        [StructField("action", StringType()), StructField("window_start", TimestampType()),
         StructField("count", LongType())]
    )  # fmt: skip
    theirs = PostgresTarget(dsn=pg_dsn, table="action counts", key=(), output_mode="append",
                            sink="otherapp.someflow")  # fmt: skip
    setup_target(theirs, schema)
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("""INSERT INTO "action counts" VALUES ('theirs', now(), 7)""")

    with pytest.raises(UserError, match=r"created for sink otherapp\.someflow, not t\.counts"):
        reset_target(target(pg_dsn))
    with pytest.raises(UserError, match=r"created for sink otherapp\.someflow, not t\.counts"):
        setup_target(target(pg_dsn, "complete", key=()), schema)

    assert rows(pg_dsn, 'SELECT action, count FROM "action counts"') == [("theirs", 7)]
    comment = "SELECT obj_description('\"action counts\"'::regclass, 'pg_class')"
    assert rows(pg_dsn, comment) == [("streamsmith: created for sink otherapp.someflow",)]
