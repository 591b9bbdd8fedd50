"""The read side without Spark: the file-sink log, partition folders, what goes to Spark."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from streamsmith.io.lake_paths import TABLES_DIR
from streamsmith.read.engine import Record, _lock, _spark_value, answer
from streamsmith.read.errors import NotOnFastPath
from streamsmith.read.tables import Field, committed_files, load_table, sink_log_files
from streamsmith.read.transpile import SparkQuery

FIELDS = {
    "events": [
        Field("name", "string"),
        Field("bytes", "long"),
        Field("score", "double"),
        Field("price", "decimal(10,2)"),
        Field("tags", {"type": "array", "elementType": "string", "containsNull": True}),
    ]
}


SCHEMA = [("n", "long"), ("day", "string")]


def write_log(log: Path, batch: str, *entries: tuple[str, str]) -> None:
    log.mkdir(parents=True, exist_ok=True)
    lines = ["v1"] + [
        json.dumps({"path": f"file://{path}", "size": 1, "isDir": False, "action": action})
        for path, action in entries
    ]
    (log / batch).write_text("\n".join(lines) + "\n")


def test_the_sink_log_is_read_from_its_latest_compaction(tmp_path: Path) -> None:
    log = tmp_path / "_spark_metadata"
    write_log(log, "0", ("/t/a.parquet", "add"))  # superseded by 1.compact
    write_log(log, "1.compact", ("/t/a.parquet", "add"), ("/t/b.parquet", "add"))
    write_log(log, "2", ("/t/c%20d.parquet", "add"), ("/t/a.parquet", "delete"))
    (log / ".3.tmp").write_text("v1\n")  # a batch being written: not committed
    assert sink_log_files(log) == [Path("/t/b.parquet"), Path("/t/c d.parquet")]


def test_a_missing_batch_leaves_the_table_to_spark(tmp_path: Path) -> None:
    log = tmp_path / "_spark_metadata"
    write_log(log, "0", ("/t/a.parquet", "add"))
    write_log(log, "2", ("/t/b.parquet", "add"))
    with pytest.raises(NotOnFastPath, match="no batch 1"):
        sink_log_files(log)


def test_a_table_without_a_log_is_listed_as_spark_lists_it(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for name in ("day=a%3Ab/x.parquet", "day=__HIVE_DEFAULT_PARTITION__/y.parquet",
                 "_staging-3/z.parquet", ".hidden/w.parquet", "_SUCCESS"):  # fmt: skip
        (table / name).parent.mkdir(parents=True, exist_ok=True)
        (table / name).write_bytes(b"")
    fields = [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in SCHEMA]
    schema = {"type": "struct", "fields": fields}
    (table / "_streamsmith_schema.json").write_text(json.dumps(schema))
    assert [p.relative_to(table).as_posix() for p in committed_files(table)] == [
        "day=__HIVE_DEFAULT_PARTITION__/y.parquet",
        "day=a%3Ab/x.parquet",
    ]
    loaded = load_table("t", table)
    assert [file.partition for file in loaded.files] == [(("day", None),), (("day", "a:b"),)]
    assert loaded.data == (Field("n", "long"),)
    assert loaded.partitions == (Field("day", "string"),)


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT round(score, 1) AS r FROM events", "function round"),
        ("SELECT avg(score) AS a FROM events", "floating-point"),
        ("SELECT sum(bytes / 2) AS s FROM events", "floating-point"),
        ("SELECT price / 3 AS p FROM events", "division with decimals"),
        ("SELECT bytes / 1.5 AS p FROM events", "division with decimals"),
        ("SELECT avg(price) AS p FROM events", "over decimals"),
        ("SELECT tags[0] AS t FROM events", "array subscript"),
        ("SELECT substring(name, 0, 2) AS s FROM events", "position"),
        ("SELECT date_format(current_date(), 'EEE') AS d FROM events", "a pattern beyond"),
        ("SELECT upper(name) FROM events", "name it with AS"),
        ("SELECT concat(name, score) AS c FROM events", "to text"),
        ("SELECT * FROM other", "not a lake table"),
        ("SELECT * FROM db.events", "in a database"),
        ("INSERT INTO events SELECT * FROM events", "not a single SELECT"),
    ],
)
def test_what_could_differ_is_refused(sql: str, reason: str) -> None:
    with pytest.raises(NotOnFastPath, match=reason):
        SparkQuery(sql).to_duckdb(FIELDS)


def test_spark_semantics_are_kept_in_duckdb_sql() -> None:
    sql = SparkQuery(
        "SELECT name, count(*), sum(bytes), avg(bytes), count(DISTINCT name), bytes / 2 AS half, "
        "CAST(name AS int) AS n FROM events WHERE name LIKE 'a\\\\_%' GROUP BY name, bytes"
    ).to_duckdb(FIELDS)
    assert '"count(1)"' in sql and '"sum(bytes)"' in sql and '"avg(bytes)"' in sql
    assert '"count(DISTINCT name)"' in sql
    named = SparkQuery("SELECT NAME, e.Bytes, max(NAME) FROM events e GROUP BY 1, 2").to_duckdb(
        FIELDS
    )
    assert named.startswith('SELECT NAME AS "NAME", e.Bytes AS "Bytes", MAX(NAME) AS "max(NAME)"')
    assert "ERROR('[DIVIDE_BY_ZERO] Division by zero')" in sql  # ANSI: x / 0 fails
    assert "CAST(name AS INT)" in sql and "TRY_CAST" not in sql
    assert "ESCAPE '\\'" in sql
    lenient = SparkQuery("SELECT CAST(name AS int) AS n FROM events").to_duckdb(FIELDS, ansi=False)
    assert "TRY_CAST" in lenient


def test_the_default_reading_spec_sets_no_spark_conf() -> None:
    """``streamsmith query`` without an app reads the default storage root with the
    cloudtrail app's Spark conf without importing the app: that conf must stay empty."""
    from streamsmith.apps import get_app

    assert "spark" not in get_app("cloudtrail").default_spec


@pytest.mark.parametrize(
    ("given", "env"), [(None, None), (None, "from-env"), ("lake", "from-env"), ("~/lake", None)]
)
def test_a_read_naming_no_spec_reads_by_the_default_spec_without_building_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str | None, env: str | None
) -> None:
    """``streamsmith query`` with no app, spec file or ``--set`` skips the spec's models
    (pydantic): the same storage root and Spark conf as the spec they would build."""
    from streamsmith.cli.sql import DEFAULT_READING_SPEC, reading_conf
    from streamsmith.config import load_spec
    from streamsmith.defaults import STORAGE_ROOT_ENV

    monkeypatch.chdir(tmp_path)
    if env is None:
        monkeypatch.delenv(STORAGE_ROOT_ENV, raising=False)
    else:
        monkeypatch.setenv(STORAGE_ROOT_ENV, env)
    spec = load_spec(DEFAULT_READING_SPEC, storage_root=given)
    assert reading_conf(None, None, None, given) == (spec.root, spec.spark.conf)


def test_a_command_line_naming_a_command_builds_only_it() -> None:
    """``streamsmith query ...`` builds the query command alone (typer reads every
    command's signature otherwise), with the same parameters; other lines get all."""
    import typer.main

    from streamsmith.cli import cli, command_line

    assert command_line([]) is cli and command_line(["--help"]) is cli
    assert command_line(["querx"]) is cli  # click suggests `query` from the full list
    everything = typer.main.get_group(cli)
    for args, name in (["query", "SELECT 1"], "query"), (["checkpoint", "show"], "checkpoint"):
        only = command_line(args)
        assert isinstance(only, typer.main.TyperGroup) and list(only.commands) == [name]
        built, full = only.commands[name], everything.commands[name]
        assert [p.name for p in built.params] == [p.name for p in full.params]
        assert built.help == full.help


def test_a_table_named_by_a_relative_path_finds_its_committed_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "lake" / "t"
    (table / "day=mon").mkdir(parents=True)
    (table / "day=mon" / "a.parquet").write_bytes(b"")
    write_log(table / "_spark_metadata", "0", (str(table / "day=mon" / "a.parquet"), "add"))
    monkeypatch.chdir(tmp_path)
    loaded = load_table("t", Path("lake/t"))
    assert [file.partition for file in loaded.files] == [(("day", "mon"),)]


def test_a_record_prints_and_converts_as_pyspark_s_row() -> None:
    from datetime import datetime

    from pyspark.sql import Row

    start = datetime(2026, 11, 20, 10)
    record = Record(["n", "window", "tags"], [1, Record(["start"], [start]), {"k": [2]}])
    row = Row(n=1, window=Row(start=start), tags={"k": [2]})
    assert repr(record) == repr(row) and str(record[1]) == str(row[1])
    assert record.asDict(recursive=True) == row.asDict(recursive=True)
    assert record.asDict()["window"] == row.asDict()["window"]


def test_timestamps_come_back_as_pyspark_gives_them() -> None:
    """An instant from DuckDB (aware, in the session zone) as PySpark's naive local time."""
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo

    import duckdb
    from pyspark.sql.types import TimestampType

    instant = datetime(2026, 11, 20, 10, 0, 0, 123456, tzinfo=ZoneInfo("America/New_York"))
    micros = (instant - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    kind = duckdb.connect().sql("SELECT now() AS t").types[0]
    assert _spark_value(instant, kind) == TimestampType().fromInternal(micros)


def test_a_cte_named_like_a_file_reads_no_file_outside_the_lake(tmp_path: Path) -> None:
    import duckdb

    root = tmp_path / "root"
    (root / TABLES_DIR / "events").mkdir(parents=True)
    outside = tmp_path / "private.csv"
    with duckdb.connect() as connection:
        connection.execute(f"COPY (SELECT 1 AS n) TO '{root / TABLES_DIR / 'events/a.parquet'}'")
        connection.execute(f"COPY (SELECT 'hunter2' AS secret) TO '{outside}'")
    trick = (
        f"WITH x AS (SELECT * FROM (WITH `{outside}` AS (SELECT 1 a) SELECT a FROM `{outside}`)) "
        f"SELECT * FROM `{outside}`"
    )
    assert SparkQuery(trick).tables == {str(outside).lower()}  # the outer name is no CTE
    with pytest.raises(NotOnFastPath, match="not a lake table"):
        answer(root, trick, max_rows=10)
    # A CTE in scope is still one; the lake's tables are read.
    rows, _ = answer(root, "WITH e AS (SELECT n FROM events) SELECT n FROM e", max_rows=10)
    assert rows == [(1,)]

    # And the connection itself reads the lake's folders only, locked.
    with duckdb.connect() as connection:
        connection.execute(f"CREATE VIEW events AS SELECT * FROM '{root / TABLES_DIR}/*/*.parquet'")
        _lock(connection, [root / TABLES_DIR])
        assert connection.sql("SELECT n FROM events").fetchall() == [(1,)]
        with pytest.raises(duckdb.PermissionException):
            connection.sql(f"SELECT * FROM '{outside}'").fetchall()
        with pytest.raises(duckdb.Error, match="locked"):
            connection.execute("SET enable_external_access = true")
