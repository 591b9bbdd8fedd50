"""Materialized views: a batch query over the pipeline's tables (and over another view),
recomputed into its Delta table after each catch-up run (through the CLI), one version a
refresh; shown in the dry-run graph; refused where it would never refresh."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from shop import ORDER_COLUMNS, deliver, shop_spec, write_project
from streamsmith.cli import cli
from streamsmith.errors import UserError
from streamsmith.monitor.eventlog import EventLog, read_events
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.scheduler import ManualClock, Scheduler
from streamsmith.runtime.supervisor import plan_monitor
from streamsmith.runtime.views import refresh, refresh_failures

SPEC = shop_spec(
    materialized_views={
        "by_customer": {"sql": "SELECT customer, count(*) AS orders, sum(amount) AS amount "
                               "FROM orders GROUP BY customer",
                        "description": "Orders and spend per customer."},
        "big_spenders": {"sql": "SELECT customer FROM by_customer WHERE amount >= 10"},
    }
)  # fmt: skip
DELIVERIES = [[("o1", "ann", 10), ("o2", "bob", 5)], [("o3", "bob", 7), ("o4", "cid", 2)]]


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.deep  # two catch-up runs through the CLI; make test refreshes views directly
def test_views_are_recomputed_after_each_catch_up_run(spark: SparkSession, tmp_path: Path) -> None:
    spec = write_project(tmp_path, SPEC)
    root = str(tmp_path / "data")

    def select(sql: str) -> list[str]:
        answer = invoke("query", sql, "--root", root, "--engine", "duckdb", "--format", "csv")
        return answer.splitlines()[1:]

    plan = invoke("dry-run", str(spec), "--plan-only")
    assert "materialized view by_customer: Orders and spend per customer.\n" in plan
    assert "  refreshed after a run of orders\n" in plan
    assert plan.endswith(
        "dependency graph (sources -> flows -> what they write; flows start in this order, "
        "then the views refresh):\n"
        "  source raw -> orders\n"
        "  orders -> table orders, quarantine orders_quarantine\n"
        "  orders -> by_customer (materialized view, reads table orders)\n"
        "  by_customer -> big_spenders (materialized view, reads view by_customer)\n"
    )

    deliver(tmp_path, 0, DELIVERIES[0])
    invoke("run", str(spec))
    assert select("SELECT * FROM by_customer ORDER BY customer") == ["ann,1,10", "bob,1,5"]
    assert select("SELECT * FROM big_spenders") == ["ann"]

    deliver(tmp_path, 1, DELIVERIES[1])
    invoke("run", str(spec))
    assert select("SELECT * FROM by_customer ORDER BY customer") == [
        "ann,1,10", "bob,2,12", "cid,1,2"
    ]  # fmt: skip
    assert select("SELECT * FROM big_spenders ORDER BY customer") == ["ann", "bob"]
    # One version a refresh: the first result is still there to travel back to.
    assert select("SELECT * FROM by_customer VERSION AS OF 0 ORDER BY customer") == [
        "ann,1,10", "bob,1,5"
    ]  # fmt: skip
    history = invoke("table", "history", "by_customer", "--root", root, "--format", "json")
    assert [json.loads(line)["operation"] for line in history.splitlines()] == ["WRITE", "WRITE"]

    refreshed = [(e["view"], e["trigger"], e["rows"], e["version"])
                 for e in read_events(tmp_path / "data", "shop")
                 if e["event"] == "view_refreshed"]  # fmt: skip
    assert refreshed == [
        ("by_customer", "run", 2, 0), ("big_spenders", "run", 1, 0),
        ("by_customer", "run", 3, 1), ("big_spenders", "run", 2, 1),
    ]  # fmt: skip


@pytest.mark.deep  # ~25 s; make test refreshes views on their cron (below), refuses bad ones
def test_a_refresh_recomputes_each_view_after_those_it_reads(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_project(tmp_path, SPEC)
    plan = build_plan(*load_pipeline(tmp_path / "streamsmith.yml"))
    orders = str(plan.root / "tables/orders")
    log = EventLog(plan.root, "shop")

    def view(name: str) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in spark.read.format("delta").load(
            str(plan.root / "tables" / name)).collect())  # fmt: skip

    assert [v.name for v in plan.views] == ["by_customer", "big_spenders"]
    assert [v.flows for v in plan.views] == [frozenset({"orders"})] * 2
    for delivery in DELIVERIES:
        frame = spark.createDataFrame(delivery, ORDER_COLUMNS)
        frame.write.format("delta").mode("append").save(orders)
        assert refresh_failures(refresh(spark, plan.root, plan.views, log.write, "run")) == []
    assert view("by_customer") == [("ann", 1, 10), ("bob", 2, 12), ("cid", 1, 2)]
    assert view("big_spenders") == [("ann",), ("bob",)]
    first = spark.read.format("delta").option("versionAsOf", 0).load(
        str(plan.root / "tables/by_customer"))  # fmt: skip
    assert sorted(tuple(r) for r in first.collect()) == [("ann", 1, 10), ("bob", 1, 5)]


@pytest.mark.parametrize(
    ("setting", "error"),
    [
        ("trigger=interval=10s", "flow 'orders' runs always on, so no catch-up run ends"),
        ("materialized_views.big_spenders.sql=SELECT * FROM big_spenders",
         "materialized views read each other in a cycle (big_spenders reads big_spenders)"),
        ("materialized_views.orders.sql=SELECT 1", "has the name of a table a flow writes"),
        ("materialized_views.by_customer.sql=DROP TABLE orders", "must be a query"),
    ],
)  # fmt: skip
def test_a_view_that_cannot_refresh_is_refused(tmp_path: Path, setting: str, error: str) -> None:
    write_project(tmp_path, SPEC)
    with pytest.raises(UserError, match="materialized") as raised:
        build_plan(*load_pipeline(tmp_path / "streamsmith.yml", sets=[setting]))
    assert error in str(raised.value)


def test_the_scheduler_refreshes_a_view_on_its_cron(spark: SparkSession, tmp_path: Path) -> None:
    document = copy.deepcopy(SPEC)
    document["schedule"] = "0 0 1 1 *"  # the flow's catch-ups: not due in this test
    document["materialized_views"]["by_customer"]["schedule"] = "30 10 * * *"
    write_project(tmp_path, document)
    plan = build_plan(*load_pipeline(tmp_path / "streamsmith.yml"))
    frame = spark.createDataFrame(DELIVERIES[0], ORDER_COLUMNS)
    frame.write.format("delta").save(str(plan.root / "tables/orders"))

    monitor = plan_monitor(plan)
    clock = ManualClock(datetime(2026, 11, 25, 10, 29, tzinfo=UTC))
    scheduler = Scheduler(spark, plan, monitor, clock)
    try:
        scheduler.start()
        clock.moment = datetime(2026, 11, 25, 10, 30, tzinfo=UTC)
        scheduler.step()
    finally:
        scheduler.stop()

    refreshed = [(e["view"], e["trigger"], e["rows"]) for e in read_events(plan.root, "shop")
                 if e["event"] == "view_refreshed"]  # fmt: skip
    # big_spenders has no schedule of its own, but reads by_customer: refreshed after it.
    assert refreshed == [("by_customer", "30 10 * * *", 2), ("big_spenders", "30 10 * * *", 1)]
    table = spark.read.format("delta").load(str(plan.root / "tables/by_customer"))
    assert sorted(tuple(r) for r in table.collect()) == [("ann", 1, 10), ("bob", 1, 5)]


def test_declared_properties_and_clustering_hold_through_run_refresh_and_backfill(
    spark: SparkSession, tmp_path: Path
) -> None:
    document = shop_spec(materialized_views={
        "by_customer": {"sql": "SELECT customer, sum(amount) AS amount FROM orders "
                               "GROUP BY customer",
                        "cluster_by": ["customer"], "properties": {"quality": "gold"}},
    })  # fmt: skip
    document["flows"]["orders"]["sink"].update(
        cluster_by=["customer"], properties={"quality": "silver", "delta.appendOnly": "true"}
    )
    spec = write_project(tmp_path, document)
    deliver(tmp_path, 0, DELIVERIES[0])
    plan = invoke("dry-run", str(spec), "--plan-only")
    assert "clustered by customer, properties delta.appendOnly=true, quality=silver" in plan
    invoke("run", str(spec))
    invoke("backfill", str(spec))

    def declared(path: Path) -> tuple[dict[str, str], list[str], int]:
        (detail,) = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()
        return detail.properties, list(detail.clusteringColumns), detail.numFiles > 0

    silver = {"quality": "silver", "delta.appendOnly": "true"}
    gold = ({"quality": "gold"}, ["customer"], True)
    assert declared(tmp_path / "data/tables/orders") == (silver, ["customer"], True)
    assert declared(tmp_path / "data/tables/by_customer") == gold
    backfilled = tmp_path / "data/backfill/orders"
    assert declared(backfilled) == (silver, ["customer"], True)

    # A changed value is set on the next run; the view's refresh keeps its clustering.
    document["flows"]["orders"]["sink"]["properties"]["quality"] = "checked"
    spec.write_text(yaml.safe_dump(document))
    deliver(tmp_path, 1, DELIVERIES[1])
    invoke("run", str(spec))
    checked = {**silver, "quality": "checked"}
    assert declared(tmp_path / "data/tables/orders") == (checked, ["customer"], True)
    assert declared(tmp_path / "data/tables/by_customer") == gold
    totals = spark.read.format("delta").load(str(tmp_path / "data/tables/by_customer")).collect()
    assert sorted(tuple(row) for row in totals) == [("ann", 10), ("bob", 12), ("cid", 2)]

    document["flows"]["orders"]["sink"]["partition_by"] = ["customer"]
    spec.write_text(yaml.safe_dump(document))
    with pytest.raises(UserError, match="partitioned or clustered, not both"):
        build_plan(*load_pipeline(spec))
