"""A Spark Declarative Pipelines project, written by hand as a user of SDP would: the
shape ``spark-pipelines init`` makes (its two example materialized views), plus a
streaming table over JSON files, a temporary view, a streaming table partitioned by
region, two append flows made in a ``for`` loop into one streaming table, a materialized
view joining a streaming table with another view, and a SQL streaming table; the input is
delivered in chunks. ``expected`` is what every dataset holds after some chunks, worked
out in plain Python."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

SPEC = """\
name: shop
storage: file://{folder}/pipeline-storage
configuration:
  shop.min_amount: "2"
  spark.sql.shuffle.partitions: "2"
libraries:
  - glob:
      include: transformations/**
"""

# spark-pipelines init's two files, unchanged.
INIT_PYTHON = """\
from pyspark import pipelines as dp
from pyspark.sql import DataFrame

@dp.materialized_view
def example_python_materialized_view() -> DataFrame:
    return spark.range(10)
"""
INIT_SQL = """\
CREATE MATERIALIZED VIEW example_sql_materialized_view AS
SELECT id FROM example_python_materialized_view
WHERE id % 2 = 0
"""

ORDERS_PY = """\
from pathlib import Path

from pyspark import pipelines as dp
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

DATA = Path(__file__).resolve().parent.parent / "data"


@dp.table(comment="orders as they arrive", table_properties={"quality": "bronze"})
def orders_raw() -> DataFrame:
    return (
        spark.readStream.format("json")
        .schema("order_id string, customer string, amount double, region string")
        .load(str(DATA / "orders"))
    )


@dp.temporary_view
def orders_clean() -> DataFrame:
    floor = float(spark.conf.get("shop.min_amount"))
    return spark.readStream.table("orders_raw").where(F.col("amount") >= floor)


@dp.table(partition_cols=["region"])
def orders_silver() -> DataFrame:
    cents = (F.col("amount") * 100).cast("long")
    return spark.readStream.table("orders_clean").withColumn("amount_cents", cents)


dp.create_streaming_table("region_events", comment="one row per order, by region flow")
for region in ("eu", "us"):

    @dp.append_flow(target="region_events", name=f"region_events_{region}")
    def events() -> DataFrame:
        orders = spark.readStream.table("orders_raw").where(F.col("region") == region)
        return orders.select("order_id", F.lit(region).alias("flow_region"))


@dp.materialized_view
def customers() -> DataFrame:
    return spark.read.format("json").schema("customer string, name string").load(
        str(DATA / "customers")
    )
"""

GOLD_SQL = """\
-- gold: revenue by customer, and the big orders as they come
CREATE MATERIALIZED VIEW revenue_by_customer AS
SELECT c.name, sum(o.amount) AS revenue, count(*) AS orders
FROM orders_silver o JOIN customers c ON o.customer = c.customer
GROUP BY c.name;

CREATE STREAMING TABLE big_orders
COMMENT 'orders of more than 10'
AS SELECT order_id, amount FROM STREAM(orders_silver) WHERE amount > 10;
"""

CUSTOMERS = [{"customer": "c1", "name": "Ann"}, {"customer": "c2", "name": "Bob"}]
ORDERS: list[list[dict[str, Any]]] = [
    [
        {"order_id": "o1", "customer": "c1", "amount": 5.0, "region": "eu"},
        {"order_id": "o2", "customer": "c2", "amount": 20.0, "region": "us"},
        {"order_id": "o3", "customer": "c1", "amount": 1.0, "region": "eu"},
    ],
    [
        {"order_id": "o4", "customer": "c2", "amount": 7.5, "region": "us"},
        {"order_id": "o5", "customer": "c3", "amount": 50.0, "region": "eu"},
        {"order_id": "o6", "customer": "c1", "amount": 0.5, "region": "us"},
    ],
]
DATASETS = (
    "example_python_materialized_view",
    "example_sql_materialized_view",
    "orders_raw",
    "orders_silver",
    "region_events",
    "customers",
    "revenue_by_customer",
    "big_orders",
)


def write_project(folder: Path) -> None:
    """The project's files in ``folder``, and its customers (no orders yet)."""
    files = {
        "spark-pipeline.yml": SPEC.format(folder=folder.resolve()),
        "transformations/example_python_materialized_view.py": INIT_PYTHON,
        "transformations/example_sql_materialized_view.sql": INIT_SQL,
        "transformations/orders.py": ORDERS_PY,
        "transformations/gold.sql": GOLD_SQL,
        "data/customers/customers.json": _lines(CUSTOMERS),
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "data/orders").mkdir(parents=True, exist_ok=True)


def deliver(folder: Path, chunk: int) -> None:
    """Chunk ``chunk`` of the orders, as one new file."""
    (folder / f"data/orders/part-{chunk}.json").write_text(_lines(ORDERS[chunk]), "utf-8")


def expected(
    chunks: int, delivered: list[list[dict[str, Any]]] = ORDERS
) -> dict[str, list[tuple[Any, ...]]]:
    """Every dataset's rows (sorted, columns in the dataset's order) once the first
    ``chunks`` chunks of ``delivered`` are in."""
    orders = [order for chunk in delivered[:chunks] for order in chunk]
    silver = [o for o in orders if o["amount"] >= 2]
    names = {c["customer"]: c["name"] for c in CUSTOMERS}
    revenue: dict[str, list[float]] = defaultdict(list)
    for order in silver:
        if order["customer"] in names:
            revenue[names[order["customer"]]].append(order["amount"])
    tables = {
        "example_python_materialized_view": [(n,) for n in range(10)],
        "example_sql_materialized_view": [(n,) for n in range(0, 10, 2)],
        "orders_raw": [tuple(o.values()) for o in orders],
        "orders_silver": [(*o.values(), int(o["amount"] * 100)) for o in silver],
        "region_events": [(o["order_id"], o["region"]) for o in orders],
        "customers": [tuple(c.values()) for c in CUSTOMERS],
        "revenue_by_customer": [(n, sum(a), len(a)) for n, a in revenue.items()],
        "big_orders": [(o["order_id"], o["amount"]) for o in silver if o["amount"] > 10],
    }
    return {name: sorted(rows) for name, rows in tables.items()}


def _lines(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)
