"""What streamsmith adds applies to an unchanged SDP project, run from its folder as its
user runs the commands (in-process): a catch-up, then ``status`` (its flows, counts and
quarantine), ``query`` of its tables by their SDP names, ``table history``, the
dashboard's graph (its JSON API) drawn from the definitions, ``check-upgrade`` after a
definition changes, ``run --full-refresh-table`` (that table and its downstream rebuilt,
the others kept) and ``backfill`` (the same definitions as one batch job)."""

from __future__ import annotations

import csv
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from typer.testing import CliRunner

import sdp_cdc
import sdp_shop
from inprocess import in_project
from sdp_expecting import CHECKED_TABLE
from streamsmith.cli import cli
from streamsmith.web.server import Dashboard

SPEC = """\
name: sdpshop
storage: file://{folder}/pipeline-storage
configuration:
  orders.input: {folder}/data/orders
libraries:
  - glob:
      include: transformations/**
"""
ORDERS_PY = """\
from pyspark import pipelines as dp
from pyspark.sql import functions as F


{orders}

dp.create_streaming_table("order_sizes")
for size, rule in (("small", "amount <= 10"), ("large", "amount > 10")):

    @dp.append_flow(target="order_sizes", name=f"{size}_orders")
    def sized():
        orders = spark.readStream.table("orders").where(rule)
        return orders.select("order_id", F.lit(size).alias("size"))
""".replace(
    "{orders}", CHECKED_TABLE.format(arguments='(comment="orders as they arrive")', name="orders")
)  # Lakeflow's expectation decorators: warn, drop, quarantine
GOLD_SQL = """\
CREATE STREAMING TABLE big_orders (
  CONSTRAINT not_cid EXPECT (customer <> 'cid') ON VIOLATION DROP ROW,
  CONSTRAINT sensible EXPECT (amount < 1000)
) AS SELECT order_id, customer, amount FROM STREAM(orders) WHERE amount > 10;

CREATE MATERIALIZED VIEW big_spenders AS
SELECT customer, sum(amount) AS total FROM big_orders GROUP BY customer;
"""
ORDERS = [
    ("o1", "ann", 5.0),
    ("o2", "bob", 20.0),
    ("o3", "ann", 30.0),
    ("o4", "cid", -1.0),  # quarantined: not positive
    ("o5", "bob", 12.0),
    ("o6", None, 3.0),  # quarantined: no customer
    (None, "dee", 4.0),  # dropped: no id
    ("o7", "dee", 5000.0),  # warned: not small
    ("o8", "cid", 15.0),  # a big order, dropped by big_orders' constraint
]


def write_project(folder: Path) -> None:
    files = {
        "spark-pipeline.yml": SPEC.format(folder=folder.resolve()),
        "transformations/orders.py": ORDERS_PY,
        "transformations/gold.sql": GOLD_SQL,
        "data/orders/part-0.json": "".join(
            json.dumps({"order_id": o, "customer": c, "amount": a}) + "\n" for o, c, a in ORDERS
        ),
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")


def streamsmith(*args: str, code: int = 0) -> list[str]:
    result = CliRunner().invoke(cli, [*args], catch_exceptions=False)
    assert result.exit_code == code, result.output
    return [line for line in result.output.splitlines() if " WARN " not in line]


def rows(table: Path) -> list[tuple[Any, ...]]:
    found = DeltaTable(str(table)).to_pyarrow_table().to_pylist()
    return sorted(tuple(row.values()) for row in found)


def history(table: str) -> list[tuple[str, ...]]:
    """``table history``'s versions: version, operation, rows in, rows out, writer."""
    lines = csv.reader(streamsmith("table", "history", table, "--format", "csv")[1:])
    return [(v, operation, rows_in, rows_out, by) for v, _, operation, rows_in, rows_out, by, _
            in lines]  # fmt: skip


def dashboard_graph(root: Path) -> list[tuple[str, str, str]]:
    """The dependency graph the dashboard's JSON API serves, as its edges."""
    dashboard = Dashboard(root).start()
    try:
        api = dashboard.url.replace("/?", "/api/dashboard?")
        with urllib.request.urlopen(api, timeout=30) as answer:
            graphs = json.load(answer)["graphs"]
    finally:
        dashboard.stop()
    return [(e["source"], e["target"], e["how"]) for e in graphs["sdpshop"]]


def test_status_query_history_graph_check_upgrade_refresh_and_backfill_of_an_sdp_project(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_project(tmp_path)
    in_project(monkeypatch, tmp_path / "transformations")  # the project found from a subfolder
    storage = tmp_path / "pipeline-storage"
    tables, backfills = storage / "tables", storage / "backfill"
    ran = streamsmith("run")
    assert ran[-5:] == [
        "sdpshop.orders: 1 batches, 9 records read, 6 rows written",
        "sdpshop.orders.quarantine: 1 batches, 2 records quarantined",
        "sdpshop.big_orders: 1 batches, 6 records read, 4 rows written",
        "sdpshop.small_orders: 1 batches, 6 records read, 1 rows written",
        "sdpshop.large_orders: 1 batches, 6 records read, 5 rows written",
    ]

    status = [json.loads(line) for line in streamsmith("status", "--format", "json")]
    failed = {rule: n["failed"] for s in status for rule, n in s["expectations"].items()}
    counts = {s["query"]: (s["batches"], s["quarantined"]) for s in status}
    assert counts == {
        "sdpshop.orders": (1, 0),
        "sdpshop.orders.quarantine": (1, 2),
        "sdpshop.big_orders": (1, 0),
        "sdpshop.small_orders": (1, 0),
        "sdpshop.large_orders": (1, 0),
    }
    rules = ("small", "has_id", "known_customer", "positive", "not_cid", "sensible")
    assert failed == dict.fromkeys(rules, 1), status
    assert "sdpshop: 4 flows, 5 queries" in streamsmith("status")

    total = "SELECT customer, total FROM big_spenders ORDER BY customer"
    assert streamsmith("query", total, "--format", "csv") == [
        "customer,total",
        "ann,30.0",
        "bob,32.0",
        "dee,5000.0",
    ]
    assert streamsmith("query", "SELECT count(*) AS n FROM order_sizes", "--format", "csv") == [
        "n",
        "6",
    ]
    assert history("big_orders") == [
        ("1", "WRITE", "4", "+4", "sdpshop.big_orders"),
        ("0", "CREATE TABLE", "", "", ""),
    ]
    assert dashboard_graph(storage) == [
        ("orders_input", "orders", ""),
        ("orders", "big_orders", "table orders, appended rows"),
        ("orders", "small_orders", "table orders, appended rows"),
        ("orders", "large_orders", "table orders, appended rows"),
        ("big_orders", "big_spenders", "reads table big_orders"),
    ]

    gold = tmp_path / "transformations/gold.sql"
    gold.write_text(gold.read_text().replace("amount FROM", "amount, amount * 100 AS cents FROM"))
    assert streamsmith("check-upgrade") == [
        "sdpshop.orders: resumes safely",
        "sdpshop.orders.quarantine: resumes safely",
        "sdpshop.big_orders: resumes safely (adds column(s) cents double: rows written before "
        "read them as null)",
        "sdpshop.small_orders: resumes safely",
        "sdpshop.large_orders: resumes safely",
    ]
    kept = {name: rows(tables / name) for name in ("orders", "order_sizes")}
    versions = {name: DeltaTable(str(tables / name)).version() for name in kept}
    refreshed = streamsmith("run", "--full-refresh-table", "big_orders")
    assert refreshed[:2] == [
        f"full refresh: removed {storage}/checkpoints/sdpshop/big_orders",
        f"full refresh: removed {storage}/tables/big_orders",
    ]
    assert "sdpshop.big_orders: 1 batches, 6 records read, 4 rows written" in refreshed
    assert "sdpshop.orders: 1 batches, 0 records read, 0 rows written" in refreshed
    assert rows(tables / "big_orders") == [
        ("o2", "bob", 20.0, 2000.0),
        ("o3", "ann", 30.0, 3000.0),
        ("o5", "bob", 12.0, 1200.0),
        ("o7", "dee", 5000.0, 500000.0),
    ]
    assert rows(tables / "big_spenders") == [("ann", 30.0), ("bob", 32.0), ("dee", 5000.0)]
    assert {name: rows(tables / name) for name in kept} == kept
    assert {name: DeltaTable(str(tables / name)).version() for name in kept} == versions

    assert streamsmith("backfill") == [
        f"orders: 6 rows in {backfills}/orders",
        f"orders_quarantine: 2 rows in {backfills}/orders_quarantine",
        f"big_orders: 4 rows in {backfills}/big_orders",
        f"order_sizes: 6 rows in {backfills}/order_sizes",  # two flows' rows
        "not backfilled: materialized views and once flows (big_spenders): `streamsmith run` "
        "refreshes them",
    ]
    for name in ("orders", "order_sizes", "big_orders"):  # the stream's rows, in one batch
        assert rows(backfills / name) == rows(tables / name), name
    for quarantine in (tables / "orders_quarantine", backfills / "orders_quarantine"):
        held = DeltaTable(str(quarantine)).to_pyarrow_table().to_pylist()
        assert sorted((row["reason"], json.loads(row["raw"])["order_id"]) for row in held) == [
            ("expectation known_customer failed", "o6"),
            ("expectation positive failed", "o4"),
        ], quarantine


def shop_tables(folder: Path) -> dict[str, list[tuple[Any, ...]]]:
    storage = folder / "pipeline-storage/tables"
    return {name: rows(storage / name) for name in sdp_shop.DATASETS}


def test_dry_run_then_two_catch_ups_in_an_unchanged_sdp_project(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``dry-run`` draws the shop project's graph, ``run`` carries the first chunk through
    every dataset and a second ``run`` only the chunk delivered since (the tables keep
    their state, unlike SDP's in-memory catalog)."""
    sdp_shop.write_project(tmp_path)
    sdp_shop.deliver(tmp_path, 0)
    in_project(monkeypatch, tmp_path / "transformations")  # the project found from a subfolder
    shown = "\n".join(streamsmith("dry-run"))
    assert "source orders_raw_input: read by the flow's own code: json " in shown
    assert shown.rstrip().endswith(
        "dependency graph (sources -> flows -> what they write; flows start in this order,"
        " then the views refresh):\n"
        "  source orders_raw_input -> orders_raw\n"
        "  orders_raw -> table orders_raw, quarantine orders_raw_quarantine\n"
        "  orders_raw -> orders_silver (table orders_raw, appended rows)\n"
        "  orders_silver -> table orders_silver\n"
        "  orders_silver -> big_orders (table orders_silver, appended rows)\n"
        "  big_orders -> table big_orders\n"
        "  orders_raw -> region_events_eu (table orders_raw, appended rows)\n"
        "  region_events_eu -> table region_events\n"
        "  orders_raw -> region_events_us (table orders_raw, appended rows)\n"
        "  region_events_us -> table region_events\n"
        "  example_python_materialized_view -> example_sql_materialized_view "
        "(materialized view, reads view example_python_materialized_view)\n"
        "  orders_silver -> revenue_by_customer (materialized view, reads table orders_silver)\n"
        "  customers -> revenue_by_customer (materialized view, reads view customers)"
    )
    assert not (tmp_path / "pipeline-storage/tables").exists()

    streamsmith("run")
    assert shop_tables(tmp_path) == sdp_shop.expected(1)

    sdp_shop.deliver(tmp_path, 1)
    second = streamsmith("run")
    assert shop_tables(tmp_path) == sdp_shop.expected(2)
    assert "shop.orders_raw: 1 batches, 3 records read, 3 rows written" in second


ARCHIVE_PY = """\
from pyspark import pipelines as dp

dp.create_sink("archive", "delta", {"path": spark.conf.get("archive.path")})


@dp.append_flow(target="archive")
def archived():
    return spark.readStream.table("customer_changes").select("id", "op", "seq")


dp.create_streaming_table("seeds")


@dp.append_flow(target="seeds", once=True)
def seeded():
    return spark.range(2).withColumnRenamed("id", "seed")
"""


def test_run_applies_an_sdp_project_s_auto_cdc_flows_sinks_and_once_flows(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sdp_cdc.write_project(tmp_path)
    (tmp_path / "transformations/archive.py").write_text(ARCHIVE_PY, encoding="utf-8")
    spec = tmp_path / "spark-pipeline.yml"
    archive = tmp_path / "archive"
    text = spec.read_text("utf-8").replace(
        "configuration:\n", f"configuration:\n  archive.path: {archive}\n"
    )
    spec.write_text(text, "utf-8")
    sdp_cdc.deliver(tmp_path, 0)
    sdp_cdc.deliver(tmp_path, 1)
    in_project(monkeypatch, tmp_path)
    streamsmith("run")
    assert sdp_cdc.tables(tmp_path) == sdp_cdc.expected(2)
    archived = DeltaTable(str(archive)).to_pyarrow_table().to_pylist()
    events = [(e["id"], e["op"], e["seq"]) for chunk in sdp_cdc.CHANGES for e in chunk]
    assert sorted((r["id"], r["op"], r["seq"]) for r in archived) == sorted(events)
    seeds = DeltaTable(str(tmp_path / "storage/tables/seeds")).to_pyarrow_table().to_pylist()
    assert sorted(r["seed"] for r in seeds) == [0, 1]
