"""The spec's maintenance on Delta tables a real streaming flow wrote: OPTIMIZE drops the
file count and changes no value, VACUUM deletes only files outside the retention and
never one a stream reading the table has not read, time travel within the retention
still answers; ``after_run`` compacts after each catch-up; ``status`` shows it all. (The
scheduler's cron and after-run maintenance: ``test_scheduler_loop``.)"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from shop import ORDER_COLUMNS, deliver, shop_spec, write_project
from streamsmith.cli import cli
from streamsmith.config import Trigger
from streamsmith.monitor.eventlog import EventLog, read_events
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime import maintenance
from streamsmith.runtime.maintenance import Operation, TableMaintenance
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import run_pipeline

SPEC = shop_spec()
SPEC["flows"]["orders"]["maintenance"] = {
    "optimize": "0 3 * * *", "vacuum": "0 4 * * *", "retain": "1 hour"
}  # fmt: skip
SPEC["flows"]["totals"] = {
    "source": "orders",  # the orders table, read as a stream
    "sql": "SELECT customer, sum(amount) AS amount FROM orders GROUP BY customer",
    "sink": {"table": "totals", "output_mode": "update", "keys": ["customer"]},
    "maintenance": {"optimize": "after_run"},
}
DELIVERIES = [
    [("o1", "ann", 10), ("o2", "bob", 5)],
    [("o3", "ann", 7)],
    [("o4", "cid", 2), ("o5", "bob", 1)],
]
ALL_ORDERS = sorted(row for delivery in DELIVERIES for row in delivery)
HOUR_MS = 3_600_000


def catch_up(spark: SparkSession, folder: Path, *sets: str) -> None:
    app, spec = load_pipeline(folder / "streamsmith.yml", sets=sets)
    run_pipeline(spark, build_plan(app, spec, Trigger("available-now")))


def streamsmith(folder: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, [*args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def maintain_orders(folder: Path) -> list[str]:
    spec = str(folder / "streamsmith.yml")
    return streamsmith(folder, "table", "maintain", spec, "--table", "orders").splitlines()


def data_files(table: Path) -> set[str]:
    return {file.name for file in table.glob("*.parquet")}


def added_by(table: Path, version: int) -> set[str]:
    log = table / "_delta_log" / f"{version:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    return {action["add"]["path"] for action in actions if "add" in action}


def age_removals(table: Path, hours: float) -> None:
    """As if every file removed so far had been removed ``hours`` earlier: the removal
    times in the table's log move back (the log has no checkpoint yet to hold them)."""
    assert not list((table / "_delta_log").glob("*.checkpoint.parquet"))
    for log in (table / "_delta_log").glob("*.json"):
        actions = [json.loads(line) for line in log.read_text().splitlines()]
        removals = [action["remove"] for action in actions if "remove" in action]
        for removal in removals:
            removal["deletionTimestamp"] -= int(hours * HOUR_MS)
        if removals:
            log.write_text("".join(json.dumps(action) + "\n" for action in actions))
            log.with_name(f".{log.name}.crc").unlink(missing_ok=True)  # Hadoop's checksum


def checkpoints(log_dir: Path) -> list[int]:
    return [int(f.name[:20]) for f in log_dir.glob("*.checkpoint.parquet")]


def rows(table: Path, version: int | None = None) -> list[tuple[Any, ...]]:
    content = DeltaTable(str(table), version=version).to_pyarrow_table().to_pylist()
    return sorted(tuple(row.values()) for row in content)


def raw_rows(quarantine: Path) -> list[str]:
    """The raw lines a quarantine table holds."""
    return sorted(row["raw"] for row in DeltaTable(str(quarantine)).to_pyarrow_table().to_pylist())


@pytest.mark.deep  # four catch-ups: make test covers the guards on the scheduler and specs
def test_maintenance_compacts_and_vacuums_without_losing_a_row_or_a_streams_files(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_project(tmp_path, SPEC)
    orders = tmp_path / "data/tables/orders"
    totals_behind = "flows.totals.enabled=false"

    deliver(tmp_path, 0, DELIVERIES[0])
    catch_up(spark, tmp_path)  # orders: version 1; totals read it
    deliver(tmp_path, 1, DELIVERIES[1])
    catch_up(spark, tmp_path, totals_behind)  # orders: version 2, which totals has not read
    first_files = added_by(orders, 1) | added_by(orders, 2)
    assert len(first_files) == 2

    # Compacted now: 2 files into 1 (version 3); retain written into the table (version
    # 4); nothing removed long enough ago to delete.
    assert maintain_orders(tmp_path) == [
        "orders: optimize: 2 files compacted into 1",
        "orders: vacuum: 0 files deleted, unused for 1 hours; kept the files of version 2 "
        "on, which shop.totals has not read",
    ]
    properties = DeltaTable(str(orders)).metadata().configuration
    # The record of a removed file stays in the log twice the retention (below).
    assert properties["delta.deletedFileRetentionDuration"] == "interval 2 hours"
    assert rows(orders) == rows(orders, 2) == sorted(DELIVERIES[0] + DELIVERIES[1])

    # 90 minutes later (the removals made older), a third delivery, compacted again: the
    # first two files are outside the retention, but totals has not read version 2.
    age_removals(orders, 1.5)
    deliver(tmp_path, 2, DELIVERIES[2])
    catch_up(spark, tmp_path, totals_behind)  # version 5
    assert maintain_orders(tmp_path) == [
        "orders: optimize: 2 files compacted into 1",  # version 6
        "orders: vacuum: 0 files deleted, unused for 1 hours; kept the files of version 2 "
        "on, which shop.totals has not read",
    ]
    assert first_files <= data_files(orders)

    # totals reads on, from the files vacuum kept for it: the rows of every delivery.
    catch_up(spark, tmp_path)
    assert rows(tmp_path / "data/tables/totals") == [("ann", 17), ("bob", 6), ("cid", 2)]

    # Now nothing holds the first two files: vacuum deletes them, and only them, though
    # a log checkpoint was written since their removal passed the retention (one written
    # every 10 commits by a stream): it keeps the records of removed files twice the
    # retention, the records vacuum finds them by.
    DeltaTable(str(orders)).create_checkpoint()
    before = data_files(orders)
    assert maintain_orders(tmp_path) == [
        "orders: optimize: 0 files compacted into 0",
        "orders: vacuum: 2 files deleted, unused for 1 hours (and 2 checksum files)",
    ]
    assert data_files(orders) == before - first_files
    assert rows(orders) == ALL_ORDERS

    # Time travel within the retention answers with the version's rows; before it, the
    # version's files are gone.
    root = str(tmp_path / "data")
    answer = streamsmith(tmp_path, "query", "SELECT order_id, customer, amount FROM orders "
                         "VERSION AS OF 5 ORDER BY order_id", "--root", root, "--engine",
                         "duckdb", "--format", "csv")  # fmt: skip
    assert answer.splitlines()[1:] == [",".join(map(str, row)) for row in ALL_ORDERS]
    gone = CliRunner().invoke(cli, ["query", "SELECT * FROM orders VERSION AS OF 2", "--root",
                                    root, "--engine", "duckdb"])  # fmt: skip
    assert gone.exit_code != 0

    # Each operation is an event; totals was compacted after each run that ran it.
    events = [e for e in read_events(tmp_path / "data", "shop") if e["event"] == "maintenance"]
    done = [(e["table"], e["operation"], e["trigger"], e["files_removed"], e["files_added"])
            for e in events]  # fmt: skip
    assert done == [
        ("totals", "optimize", "after_run", 2, 1),
        ("orders", "optimize", "now", 2, 1), ("orders", "vacuum", "now", 0, 0),
        ("orders", "optimize", "now", 2, 1), ("orders", "vacuum", "now", 0, 0),
        ("totals", "optimize", "after_run", 0, 0),  # the merge left one file
        ("orders", "optimize", "now", 0, 0), ("orders", "vacuum", "now", 2, 0),
    ], done  # fmt: skip
    assert all(e["duration_s"] >= 0 for e in events)

    status = streamsmith(tmp_path, "status", "shop", "--root", root, "--format", "json")
    by_query = {s["query"]: s for s in map(json.loads, status.splitlines())}
    orders_done = by_query["shop.orders"]["maintenance"]
    assert orders_done["orders vacuum"].endswith(
        ": 2 files deleted, unused for 1 hours (and 2 checksum files)"
    )
    assert orders_done["orders optimize"].endswith(": 0 files compacted into 0")
    totals_done = by_query["shop.totals"]["maintenance"]
    assert totals_done["totals optimize"].endswith(": 0 files compacted into 0")


def test_vacuum_keeps_the_files_a_stream_reading_the_table_has_not_read(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = tmp_path / "data"
    orders = root / "tables/orders"
    task = TableMaintenance("orders", orders, "orders", "shop.orders", "now", "now", 1)
    log = EventLog(root, "shop")

    def append(row: tuple[str, str, int]) -> None:
        frame = spark.createDataFrame([row], ORDER_COLUMNS)
        frame.write.format("delta").mode("append").save(str(orders))

    def follow() -> list[tuple[Any, ...]]:
        """What a downstream stream (its checkpoint where a flow's lives) reads next."""
        seen: list[tuple[Any, ...]] = []
        query = (
            spark.readStream.format("delta").load(str(orders)).writeStream
            .foreachBatch(lambda batch, _: seen.extend(tuple(r) for r in batch.collect()))
            .trigger(availableNow=True)
            .option("checkpointLocation", str(root / "checkpoints/shop/totals")).start()
        )  # fmt: skip
        try:
            query.awaitTermination()  # available-now: it ends once it has read what is there
        finally:
            query.stop()
        assert query.exception() is None
        return sorted(seen)

    def messages(operation: Operation) -> list[str]:
        return [
            event["message"]
            for event in maintenance.maintain(task, [operation], root, log.write, "now")
        ]

    append(("o1", "ann", 10))
    assert follow() == [("o1", "ann", 10)]
    append(("o2", "bob", 5))  # version 1: not read yet
    assert messages("optimize") == ["2 files compacted into 1"]
    age_removals(orders, 2)  # the two files left the table two hours ago
    assert messages("vacuum") == [
        "0 files deleted, unused for 1 hours; kept the files of version 1 on, which "
        "shop.totals has not read"
    ]
    assert follow() == [("o2", "bob", 5)]  # from the files vacuum kept
    # With them, the checksum files Hadoop wrote beside them (nothing else deletes those).
    assert messages("vacuum") == ["2 files deleted, unused for 1 hours (and 2 checksum files)"]
    assert all((orders / crc.name[1:-4]).exists() for crc in orders.glob(".*.crc"))
    assert rows(orders) == [("o1", "ann", 10), ("o2", "bob", 5)]


def test_keep_rejected_expires_old_quarantine_rows_and_the_flow_runs_on(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Rows expire by whole partitions once every file in them is older than
    keep_rejected; the flow's own table keeps every row, and the next run appends its
    rejects to the quarantine as before."""
    spec = shop_spec(maintenance={"vacuum": "0 4 * * *", "keep_rejected": "2 days"})
    write_project(tmp_path, spec)
    deliver(tmp_path, 0, [("o1", "ann", 10)])
    with (tmp_path / "data/input/part-0.jsonl").open("a") as part:
        part.write("not json\n")
    catch_up(spark, tmp_path)
    app, pipeline = load_pipeline(tmp_path / "streamsmith.yml")
    (task,) = [t for f in build_plan(app, pipeline).flows for t in f.maintenance
               if t.table == "orders_quarantine"]  # fmt: skip
    root, log = tmp_path / "data", EventLog(tmp_path / "data", "shop")

    def expire(days: float) -> str:
        now = datetime.now(UTC) + timedelta(days=days)
        (event,) = maintenance.maintain(task, ["expire"], root, log.write, "now", now=now)
        assert event["event"] == "maintenance", event
        return str(event["message"])

    assert expire(1) == "0 rows older than 48 hours deleted"  # written a day "ago"
    assert raw_rows(root / "tables/orders_quarantine") == ["not json"]
    today = datetime.now(UTC).date()
    assert (
        expire(3) == f"1 rows older than 48 hours deleted (1 partitions, ingest_date up to {today})"
    )
    assert raw_rows(root / "tables/orders_quarantine") == []
    assert rows(root / "tables/orders") == [("o1", "ann", 10)]

    deliver(tmp_path, 1, [("o2", "bob", 5)])
    with (tmp_path / "data/input/part-1.jsonl").open("a") as part:
        part.write("{broken\n")
    catch_up(spark, tmp_path)  # a restart after the cleanup: nothing lost, nothing again
    assert rows(root / "tables/orders") == [("o1", "ann", 10), ("o2", "bob", 5)]
    assert raw_rows(root / "tables/orders_quarantine") == ["{broken"]


def test_log_retain_bounds_the_delta_log_and_time_travel_within_retain_still_answers(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``maintenance.log_retain`` goes into the table at vacuum; Spark's next Delta
    checkpoint then deletes the commits older than it, and the table and its versions
    within ``retain`` still read."""
    table = tmp_path / "t"
    for batch in range(12):  # versions 0-11, Delta's checkpoint at 10
        spark.range(batch * 10, batch * 10 + 10).write.format("delta").mode("append").save(
            str(table)
        )
    log_dir = table / "_delta_log"
    old = (datetime.now(UTC) - timedelta(hours=3)).timestamp()
    for file in log_dir.iterdir():  # as if written three hours ago
        os.utime(file, (old, old))
    task = TableMaintenance(table="t", path=table, flow="f", query="a.f", optimize=None,
                            vacuum="0 4 * * *", retain_hours=1, log_retain_hours=2)  # fmt: skip
    events = maintenance.maintain(task, ("vacuum",), tmp_path, lambda e: e, "now")
    assert events[0]["properties_set"] == {
        "delta.deletedFileRetentionDuration": "interval 2 hours",
        "delta.logRetentionDuration": "interval 2 hours",
    }  # version 12
    for batch in range(12, 20):  # versions 13-20: Spark's checkpoint at 20 cleans the log
        spark.range(batch * 10, batch * 10 + 10).write.format("delta").mode("append").save(
            str(table)
        )
    commits = sorted(int(f.name[:20]) for f in log_dir.glob("*.json"))
    assert commits[0] >= 10 and commits[-1] == 20  # the three-hour-old commits are gone
    assert spark.read.format("delta").load(str(table)).count() == 200
    assert spark.read.format("delta").option("versionAsOf", 15).load(str(table)).count() == 150

    # delta-rs' log cleanup (after its own commits) leaves the checksums of the commits
    # it deletes, Delta's N.crc and Hadoop's .N.json.crc, as the long run showed: the
    # next vacuum removes those below the oldest version left, never a file being written.
    oldest = min(commits[0], *checkpoints(log_dir))
    left_behind = [f"{3:020d}.crc", f".{3:020d}.json.crc", f".{3:020d}.crc.crc"]
    writing = f".{3:020d}.json.0d1e.tmp.crc"
    for name in (*left_behind, writing):
        (log_dir / name).write_text("{}")
    kept = sorted(f.name for f in log_dir.iterdir() if f.name not in left_behind)
    events = maintenance.maintain(task, ("vacuum",), tmp_path, lambda e: e, "now")
    assert events[0]["log_checksums_removed"] == 3
    assert sorted(f.name for f in log_dir.iterdir()) == kept and oldest > 3
    assert spark.read.format("delta").option("versionAsOf", 15).load(str(table)).count() == 150
