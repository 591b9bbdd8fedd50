"""The read side's fast path: DuckDB over the committed files gives Spark's answers.

The lake is written once for the module by real Spark runs on small data: the CloudTrail
app (a date-partitioned table and its quarantine), the log-curation app (a partitioned
table, and its late and quarantine tables, written without a commit log)
and a windowed query of our own (a window struct, an array, a map and a decimal), with
the event log of those runs. Every query of the corpus is answered by both engines and
must print the same text.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streamsmith.apps import get_app
from streamsmith.cli.sql import query, register_views, run_sql
from streamsmith.config import Trigger, load_spec
from streamsmith.errors import UserError
from streamsmith.generate.cloudtrail import generate_cloudtrail
from streamsmith.generate.logs import logs_data
from streamsmith.io.lake import read_table, start_table_stream, table_path
from streamsmith.read.engine import answer
from streamsmith.read.errors import NotOnFastPath
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import run_pipeline
from streamsmith.testing import ChunkRunner

HOURLY = "cloudtrail_hourly"


@pytest.fixture(scope="module")
def lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A storage root written by real runs (see the module docstring)."""
    root = tmp_path_factory.mktemp("lake")
    cloudtrail = get_app("cloudtrail")
    plan = build_plan(
        cloudtrail,
        load_spec(cloudtrail.default_spec, storage_root=str(root)),
        Trigger("available-now"),
    )
    generate_cloudtrail(
        root / "input/cloudtrail", files=6, records_per_file=40, seed=26, corrupt_fraction=0.1
    )
    run_pipeline(spark, plan)

    logs = get_app("logs")
    spec = load_spec(logs.default_spec, storage_root=str(root))
    data = logs_data(hosts=3, entries=120, chunks=2, seed=26)
    with ChunkRunner(spark, build_plan(logs, spec, Trigger("interval", 0.0))) as runner:
        for chunk in data.chunks:
            runner.send(chunk)

    events = spark.readStream.schema(
        read_table(spark, table_path(root, "cloudtrail_events")).schema
    ).parquet(str(table_path(root, "cloudtrail_events")))
    hourly = (
        events.withWatermark("eventTime", "1 hour")
        .groupBy(F.window("eventTime", "1 hour"), "eventSource")
        .agg(
            F.count(F.lit(1)).alias("events"),
            F.sort_array(F.collect_set("eventName")).alias("names"),
            F.sum(F.length("eventName")).cast("decimal(12,2)").alias("name_chars"),
        )
        .withColumn("counts", F.create_map(F.lit("events"), F.col("events")))
    )
    stream = start_table_stream(
        hourly,
        name="tests.cloudtrail_hourly",
        path=table_path(root, HOURLY),
        checkpoint=root / "checkpoints" / HOURLY,
        trigger=Trigger("available-now"),
        table_format="parquet",
        app_id="tests.cloudtrail_hourly",
    )
    stream.awaitTermination()
    register_views(spark, root)  # once: the corpus queries Spark through these views
    return root


def printed(rows: list[Any]) -> list[tuple[list[str], str]]:
    """What ``streamsmith query`` prints for each row: its cells as text (table, csv) and
    its JSON line."""
    return [
        ([str(value) for value in row], json.dumps(row.asDict(recursive=True), default=str))
        for row in rows
    ]


def both_engines(
    spark: SparkSession, root: Path, sql: str, *, register: bool = False
) -> tuple[Any, Any]:
    """What each engine prints for ``sql``; Spark through the views the fixture registered
    (``register``: registered again, as ``streamsmith query`` does, to list the folders
    anew)."""
    fast_rows, fast_columns = answer(root, sql, max_rows=1000)
    if register:
        spark_rows, spark_columns = run_sql(spark, root, sql, 1000)
    else:
        frame = spark.sql(sql)
        spark_rows, spark_columns = frame.limit(1000).collect(), frame.columns
    return (fast_columns, printed(fast_rows)), (spark_columns, printed(spark_rows))


# Every query orders its rows completely: without ORDER BY neither engine promises an order.
CORPUS = [
    # group-bys, counts, NULL ordering (Spark: NULLS FIRST ascending, LAST descending)
    "SELECT eventName, count(*) AS n FROM cloudtrail_events GROUP BY 1 ORDER BY n DESC, 1",
    "SELECT errorCode, count(*) FROM cloudtrail_events GROUP BY errorCode ORDER BY errorCode",
    "SELECT EVENTNAME, Date, e.awsRegion, MAX(AWSREGION) FROM cloudtrail_events e "
    "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
    "SELECT errorCode, count(*) AS n FROM cloudtrail_events GROUP BY 1 ORDER BY 1 DESC",
    "SELECT count(DISTINCT eventName), count(errorCode), count(1) FROM cloudtrail_events",
    "SELECT `eventSource`, count(DISTINCT awsRegion) AS regions FROM cloudtrail_events "
    "GROUP BY `eventSource` HAVING count(*) > 1 ORDER BY 1",
    # partition column (a date) and timestamps in the session time zone
    "SELECT date, min(eventTime), max(eventTime) FROM cloudtrail_events "
    "GROUP BY date ORDER BY date",
    "SELECT * FROM cloudtrail_events ORDER BY eventID LIMIT 5",
    "SELECT eventID, date_format(eventTime, 'yyyy-MM-dd HH:mm') AS minute, hour(eventTime) AS h "
    "FROM cloudtrail_events ORDER BY eventID LIMIT 20",
    "SELECT to_date(eventTime) AS day, count(*) AS n FROM cloudtrail_events GROUP BY 1 ORDER BY 1",
    "SELECT date_trunc('HOUR', eventTime) AS hour, count(*) AS n FROM cloudtrail_events "
    "GROUP BY 1 ORDER BY 1 LIMIT 10",
    "SELECT count(*) AS n FROM cloudtrail_events "
    "WHERE eventTime >= timestamp '2026-11-21 00:00:00' AND eventTime < '2026-11-22'",
    "SELECT year(date) AS y, month(date) AS m, dayofmonth(date) AS d, count(*) AS n "
    "FROM cloudtrail_events GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
    "SELECT datediff(max(date), min(date)) AS days FROM cloudtrail_events",
    # integer arithmetic: division gives a double, div truncates, % keeps the sign
    "SELECT eventName, count(*) / 3 AS third, count(*) div 3 AS whole, count(*) % 3 AS rest "
    "FROM cloudtrail_events GROUP BY 1 ORDER BY 1",
    "SELECT avg(length(eventName)) AS avg_len, sum(length(eventName)) AS total "
    "FROM cloudtrail_events",
    # strings: LIKE (with its escape), RLIKE, functions
    "SELECT eventName FROM cloudtrail_events WHERE eventName LIKE 'Get%' GROUP BY 1 ORDER BY 1",
    "SELECT eventName FROM cloudtrail_events WHERE eventName RLIKE '^(List|Describe)' "
    "GROUP BY 1 ORDER BY 1",
    "SELECT eventSource FROM cloudtrail_events WHERE eventSource LIKE '%\\_%' "
    "OR eventSource LIKE 's3%' GROUP BY 1 ORDER BY 1",
    "SELECT eventID, upper(eventName) AS u, lower(awsRegion) AS l, length(eventID) AS len, "
    "substring(eventName, 2, 4) AS sub, concat(awsRegion, '/', eventName) AS c, "
    "concat_ws('-', awsRegion, errorCode) AS ws FROM cloudtrail_events ORDER BY eventID LIMIT 20",
    "SELECT eventID, regexp_extract(eventSource, '^([a-z0-9]+)\\\\.', 1) AS service, "
    "regexp_replace(eventName, '[aeiou]', '') AS consonants, instr(eventName, 'e') AS e_at, "
    "lpad(awsRegion, 16, '.') AS padded, trim(concat('  ', eventName, ' ')) AS trimmed "
    "FROM cloudtrail_events ORDER BY eventID LIMIT 20",
    "SELECT coalesce(errorCode, 'ok') AS outcome, if(readOnly, 'read', 'write') AS kind, "
    "count(*) AS n FROM cloudtrail_events GROUP BY 1, 2 ORDER BY 1, 2",
    "SELECT CASE WHEN length(eventName) > 12 THEN 'long' ELSE 'short' END AS size, "
    "count(*) AS n FROM cloudtrail_events GROUP BY 1 ORDER BY 1",
    "SELECT cast(count(*) AS string) AS n, cast(max(date) AS string) AS last "
    "FROM cloudtrail_events",
    "SELECT eventID, abs(length(eventName) - 10) AS a, greatest(length(eventName), 9) AS g, "
    "least(length(awsRegion), 9) AS l, nullif(errorCode, 'AccessDenied') AS e, "
    "minute(eventTime) AS mi, second(eventTime) AS s, rpad(awsRegion, 14, '*') AS r "
    "FROM cloudtrail_events WHERE length(eventName) BETWEEN 5 AND 20 ORDER BY eventID LIMIT 20",
    "SELECT count_if(readOnly) AS reads, count_if(errorCode IS NOT NULL) AS errors "
    "FROM cloudtrail_events",
    "SELECT date, sort_array(collect_set(awsRegion)) AS regions FROM cloudtrail_events "
    "GROUP BY date ORDER BY date",
    "SELECT DISTINCT eventSource FROM cloudtrail_events e WHERE EXISTS (SELECT 1 FROM "
    "cloudtrail_events f WHERE f.eventSource = e.eventSource AND f.errorCode IS NOT NULL) "
    "ORDER BY 1",
    # window functions
    "SELECT eventName, n, dense_rank() OVER (ORDER BY n DESC) AS dr, "
    "lead(eventName) OVER (ORDER BY n DESC, eventName) AS next FROM "
    "(SELECT eventName, count(*) AS n FROM cloudtrail_events GROUP BY 1) ORDER BY n DESC, 1",
    "SELECT eventName, n, rank() OVER (ORDER BY n DESC) AS r, "
    "row_number() OVER (ORDER BY n DESC, eventName) AS rn FROM "
    "(SELECT eventName, count(*) AS n FROM cloudtrail_events GROUP BY 1) ORDER BY rn",
    "SELECT date, eventID, lag(eventID) OVER (PARTITION BY date ORDER BY eventID) AS previous "
    "FROM cloudtrail_events ORDER BY date, eventID LIMIT 30",
    # the window struct, arrays, maps and decimals of our own windowed table
    f"SELECT * FROM {HOURLY} ORDER BY window.start, eventSource",
    f"SELECT window.start, window.end, eventSource, events, names, counts, name_chars "
    f"FROM {HOURLY} ORDER BY 1, 3",
    f"SELECT window, sum(events) AS events, sum(name_chars) AS chars FROM {HOURLY} "
    f"GROUP BY `window` ORDER BY window.start",
    f"SELECT eventSource, size(names) AS distinct_names, array_contains(names, 'GetObject') AS get,"
    f" counts['events'] AS n FROM {HOURLY} ORDER BY window.start, eventSource",
    f"SELECT name_chars * 2 AS doubled, name_chars + 1 AS plus, CAST(events AS decimal(10, 1)) AS d"
    f" FROM {HOURLY} ORDER BY window.start, eventSource",
    # joins between tables, the quarantine, a CTE, a union
    "SELECT q.reason, count(*) AS n FROM cloudtrail_events_quarantine q GROUP BY 1 ORDER BY 1",
    "SELECT e.date, count(*) AS events, max(d.n) AS names FROM cloudtrail_events e JOIN "
    "(SELECT date, count(DISTINCT eventName) AS n FROM cloudtrail_events GROUP BY date) d "
    "ON e.date = d.date GROUP BY e.date ORDER BY e.date",
    f"SELECT h.eventSource, count(*) AS n FROM {HOURLY} h JOIN cloudtrail_events e "
    f"ON e.eventSource = h.eventSource AND e.eventTime >= h.window.start "
    f"AND e.eventTime < h.window.end GROUP BY 1 ORDER BY 1",
    "WITH names AS (SELECT DISTINCT eventName FROM cloudtrail_events) "
    "SELECT count(*) AS n FROM names",
    "SELECT eventName FROM cloudtrail_events WHERE eventName LIKE 'Put%' UNION "
    "SELECT eventName FROM cloudtrail_events WHERE eventName LIKE 'Delete%' ORDER BY 1",
    # the log-curation app: partitioned, late and quarantined
    "SELECT service, level, count(*) AS n FROM service_logs GROUP BY 1, 2 ORDER BY 1, 2",
    "SELECT count(*) AS errors FROM service_logs WHERE level = 'ERROR' "
    "AND log_time >= '2026-11-20 10:00' AND log_time < '2026-11-20 10:30'",
    "SELECT (SELECT count(*) FROM service_logs) AS kept, (SELECT count(*) FROM "
    "service_logs_late) AS late, (SELECT count(*) FROM service_logs_quarantine) AS quarantined",
    "SELECT reason, count(*) AS n FROM service_logs_quarantine GROUP BY 1 ORDER BY 1",
    # the event log
    "SELECT app, event, count(*) AS n FROM streamsmith_events GROUP BY 1, 2 ORDER BY 1, 2",
    "SELECT query, sum(input_rows) AS rows FROM streamsmith_events WHERE event = 'progress' "
    "GROUP BY 1 ORDER BY 1",
]


@pytest.mark.parametrize("sql", CORPUS)
def test_both_engines_print_the_same_answer(spark: SparkSession, lake: Path, sql: str) -> None:
    fast, slow = both_engines(spark, lake, sql)
    assert fast == slow
    assert slow[1], "the corpus query returns rows"


# Constructs the engines answer differently: the fast path must hand them to Spark.
ROUTED = [
    ("SELECT round(avg(length(eventName)), 2) AS a FROM cloudtrail_events", "function round"),
    ("SELECT approx_count_distinct(eventName) AS n FROM cloudtrail_events", "approx_count"),
    (f"SELECT sum(events / 3) AS s FROM {HOURLY}", "floating-point"),
    (f"SELECT name_chars / 3 AS third FROM {HOURLY}", "division with decimals"),
    (f"SELECT names[0] AS first FROM {HOURLY}", "array subscript"),
    ("SELECT collect_list(eventName) AS names FROM cloudtrail_events", "sort_array"),
    ("SELECT length(eventName) + 1 FROM cloudtrail_events", "name it with AS"),
    ("SELECT floor(length(eventName) / 3) AS f FROM cloudtrail_events", "function floor"),
    ("SHOW TABLES", "not a single SELECT"),
    ("SELECT * FROM signal_windows_live", "not a lake table"),
]


@pytest.mark.parametrize(("sql", "reason"), ROUTED)
def test_what_could_differ_goes_to_spark(lake: Path, sql: str, reason: str) -> None:
    with pytest.raises(NotOnFastPath, match=reason):
        answer(lake, sql, max_rows=10)


def test_the_files_of_an_uncommitted_batch_are_never_read(spark: SparkSession, lake: Path) -> None:
    """A batch killed before its commit leaves its files in the table's folders (an existing
    partition and a new one); Spark's commit log does not list them, so neither engine
    reads them."""
    sql = "SELECT date, count(*) AS n FROM cloudtrail_events GROUP BY date ORDER BY date"
    before, _ = answer(lake, sql, max_rows=100)
    table = table_path(lake, "cloudtrail_events")
    committed = sorted(table.glob("date=*/*.parquet"))
    orphans = [
        committed[0].with_name("part-99999-killed-before-commit.c000.snappy.parquet"),
        table / "date=2026-12-31" / "part-99999-killed-before-commit.c000.snappy.parquet",
    ]
    orphans[1].parent.mkdir()
    for orphan in orphans:
        shutil.copyfile(committed[0], orphan)
    try:
        fast, slow = both_engines(spark, lake, sql, register=True)
        after, _ = answer(lake, sql, max_rows=100)
    finally:
        shutil.rmtree(orphans[1].parent)
        orphans[0].unlink()
    assert fast == slow
    assert after == before and len(after) >= 2


def test_partitions_and_window_structs_come_back_typed(lake: Path) -> None:
    rows, columns = answer(
        lake, f"SELECT window, counts FROM {HOURLY} ORDER BY window.start LIMIT 1", max_rows=1
    )
    window, counts = rows[0]
    assert columns == ["window", "counts"]
    assert repr(window).startswith("Row(start=datetime.datetime(2026, 11, ")
    assert window.asDict() == {"start": window[0], "end": window[1]}
    assert (window[1] - window[0]).total_seconds() == 3600
    assert isinstance(counts, dict) and counts["events"] >= 1
    days, _ = answer(lake, "SELECT DISTINCT date FROM cloudtrail_events ORDER BY 1", max_rows=9)
    assert [row[0].isoformat() for row in days][:1] == ["2026-11-20"]


def test_auto_says_on_stderr_why_spark_answers(
    spark: SparkSession, lake: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sql = "SELECT round(avg(length(eventName)), 2) AS a FROM cloudtrail_events"
    query(sql, root=str(lake), fmt="json", engine="auto")
    printed_out = capsys.readouterr()
    assert printed_out.err.splitlines() == [
        "on Spark: function round (not on the fast path's list)"
    ]
    expected = spark.sql(
        f"SELECT round(avg(length(eventName)), 2) AS a FROM parquet.`"
        f"{table_path(lake, 'cloudtrail_events')}`"
    ).first()
    assert expected is not None
    assert json.loads(printed_out.out) == {"a": float(expected.a)}


def test_engine_duckdb_refuses_what_it_cannot_answer_in_one_line(lake: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "streamsmith", "query", "--root", str(lake), "--engine", "duckdb",
         "SELECT approx_count_distinct(eventName) AS n FROM cloudtrail_events"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "error: --engine duckdb cannot answer this query: function approx_count_distinct "
        "(not on the fast path's list)"
    ]


def test_the_session_time_zone_is_spark_s(lake: Path) -> None:
    """Timestamps print as PySpark prints them; functions of them use the session zone."""
    sql = "SELECT min(eventTime) AS t, hour(min(eventTime)) AS h FROM cloudtrail_events"
    [(utc_time, utc_hour)], _ = answer(lake, sql, max_rows=1)
    [(ny_time, ny_hour)], _ = answer(lake, sql, max_rows=1, time_zone="America/New_York")
    assert utc_time == ny_time and isinstance(utc_time, datetime)
    assert (utc_hour - ny_hour) % 24 == 5  # November: UTC-5
    assert utc_time.tzinfo is None and utc_time.replace(tzinfo=UTC).hour == utc_hour


PROBE = """
import sys
from streamsmith.cli import main
sys.argv = ["streamsmith", "query", {sql!r}, "--root", {root!r}, "--engine", "duckdb"]
try:
    main()
finally:
    print("pyspark imported:", any(name.startswith("pyspark") for name in sys.modules),
          file=sys.stderr)
    print("spec models built:", "streamsmith.config" in sys.modules, file=sys.stderr)
"""


def test_the_fast_path_imports_no_pyspark(lake: Path) -> None:
    """Nor, with no spec to read, the spec's models (pydantic builds them at import)."""
    sql = "SELECT eventName, count(*) AS n FROM cloudtrail_events GROUP BY 1 ORDER BY n DESC, 1"
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(sql=sql, root=str(lake))],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.stderr.splitlines() == [
        "pyspark imported: False",
        "spec models built: False",
    ], done.stderr
    assert done.returncode == 0 and "eventName" in done.stdout


def test_a_delta_table_is_answered_from_its_latest_version(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Files an overwrite or a merge replaced stay in a Delta table's folder (for time
    travel) but are not in its latest version: the fast path reads the log, as Spark does."""
    from datetime import date

    from delta.tables import DeltaTable

    path = table_path(tmp_path, "accounts")
    schema = "id string, balance int, day date"
    first = [("a", 1, date(2026, 11, 1)), ("b", 2, date(2026, 11, 2))]
    spark.createDataFrame(first, schema).write.format("delta").partitionBy("day").save(str(path))
    second = [("a", 5, date(2026, 11, 1)), ("c", 7, date(2026, 11, 3))]
    spark.createDataFrame(second, schema).write.format("delta").mode("overwrite").save(str(path))
    change = spark.createDataFrame([("a", 6, date(2026, 11, 1))], schema)
    (
        DeltaTable.forPath(spark, str(path)).alias("t")
        .merge(change.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll().execute()
    )  # fmt: skip

    sql = "SELECT id, balance, day FROM accounts ORDER BY id"
    fast_rows, fast_columns = answer(tmp_path, sql, max_rows=100)
    spark_rows, spark_columns = run_sql(spark, tmp_path, sql, 100)

    assert fast_columns == spark_columns == ["id", "balance", "day"]
    assert printed(fast_rows) == printed(spark_rows)
    assert [cells for cells, _ in printed(fast_rows)] == [
        ["a", "6", "2026-11-01"], ["c", "7", "2026-11-03"]
    ]  # fmt: skip


def test_time_travel_reads_a_delta_tables_earlier_versions(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = table_path(tmp_path, "prices")
    for price in (10, 12, 15):  # versions 0, 1, 2
        frame = spark.createDataFrame([("widget", price)], "item string, price int")
        frame.write.format("delta").mode("overwrite").save(str(path))
    (parquet := table_path(tmp_path, "plain")).mkdir(parents=True)
    spark.range(1).write.mode("overwrite").parquet(str(parquet))

    def prices(sql: str) -> list[int]:
        rows, _ = run_sql(spark, tmp_path, sql, 10)
        return [row.price for row in rows]

    assert prices("SELECT price FROM prices") == [15]
    assert prices("SELECT price FROM prices VERSION AS OF 1") == [12]
    assert prices("SELECT p.price FROM prices VERSION AS OF 0 AS p") == [10]
    first = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").where("version = 0").first()
    assert first is not None
    assert prices(f"SELECT price FROM prices TIMESTAMP AS OF '{first.timestamp}'") == [10]
    # In-process (delta-rs into DuckDB) the same versions, the same instants.
    for sql in (
        "SELECT price FROM prices VERSION AS OF 1",
        "SELECT p.price FROM prices VERSION AS OF 0 AS p",
        f"SELECT price FROM prices TIMESTAMP AS OF '{first.timestamp}'",
        "SELECT a.price AS was, b.price AS now FROM prices VERSION AS OF 0 a CROSS JOIN prices b",
    ):
        fast, on_spark = both_engines(spark, tmp_path, sql, register=True)
        assert fast == on_spark, sql
    rows, _ = answer(tmp_path, "SELECT price FROM prices VERSION AS OF 1", max_rows=10)
    assert [row[0] for row in rows] == [12]
    with pytest.raises(NotOnFastPath, match="version 7 is not in the table's log"):
        answer(tmp_path, "SELECT price FROM prices VERSION AS OF 7", max_rows=10)
    with pytest.raises(NotOnFastPath, match="outside the table's history"):
        answer(tmp_path, "SELECT price FROM prices TIMESTAMP AS OF '2000-01-01'", max_rows=10)
    with pytest.raises(NotOnFastPath, match="keeps no versions"):
        answer(tmp_path, "SELECT * FROM plain VERSION AS OF 0", max_rows=10)
    with pytest.raises(UserError, match="keeps no versions"):
        run_sql(spark, tmp_path, "SELECT * FROM plain VERSION AS OF 0", 10)
