"""The Python and SQL examples of Spark's Declarative Pipelines programming guide
(``docs/declarative-pipelines-programming-guide.md``, Spark 4.1/4.2), as SDP projects.

Each example is kept as the guide writes it, but for what it reads: ``samples.*`` tables
and Kafka topics are files under the project's ``data`` folder (the guide's own
``/datasets/...`` paths are rewritten to that folder). A table the guide reads from outside
the pipeline (``samples.nyctaxi.trips``, ``orders_source``, ``customers_us_west``...) is a
streaming table over JSON files here, in ``sources.py``. The examples fall into three
projects because they reuse names: the Python ones, the SQL ones, and the ``for`` loop's
(its ``customer_orders`` is a temporary view, the other Python example's a materialized
view)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SPEC = """\
name: guide_{name}
storage: file://{folder}/pipeline-storage
configuration:
  spark.sql.shuffle.partitions: "2"
libraries:
  - glob:
      include: transformations/**
"""

# -- the guide's Python examples ------------------------------------------------------
BASIC_MV = """\
from pyspark import pipelines as dp
from pyspark.sql import DataFrame

@dp.materialized_view
def basic_mv() -> DataFrame:
    return spark.table("trips")
"""
NAMED_MV = """\
from pyspark import pipelines as dp
from pyspark.sql import DataFrame

@dp.materialized_view(name="trips_mv")
def basic_mv() -> DataFrame:
    return spark.table("trips")
"""
BASIC_TV = """\
from pyspark import pipelines as dp
from pyspark.sql import DataFrame

@dp.temporary_view
def basic_tv() -> DataFrame:
    return spark.table("trips")
"""
BASIC_ST = """\
from pyspark import pipelines as dp
from pyspark.sql import DataFrame

@dp.table
def basic_st() -> DataFrame:
    return spark.readStream.table("trips")
"""
# Kafka's topic "orders" is JSON files here: the source changed, the rest as in the guide.
INGESTION_ST = """\
from pyspark import pipelines as dp
from pyspark.sql import DataFrame

@dp.table
def ingestion_st() -> DataFrame:
    return (
        spark.readStream
        .format("json")
        .schema(ORDER_SCHEMA)
        .load("/datasets/kafka/orders")
    )
"""
BATCH_MV = """\
from pyspark import pipelines as dp
from pyspark.sql import DataFrame

@dp.materialized_view
def batch_mv() -> DataFrame:
    return spark.read.format("json").load("/datasets/retail-org/sales_orders")
"""
QUERYING = """\
from pyspark import pipelines as dp
from pyspark.sql import DataFrame
from pyspark.sql.functions import col

@dp.table
def orders() -> DataFrame:
    return (
        spark.readStream
        .format("json")
        .schema(ORDER_SCHEMA)
        .load("/datasets/kafka/orders")
    )

@dp.materialized_view
def customers() -> DataFrame:
    return (
        spark.read
        .format("csv")
        .option("header", True)
        .load("/datasets/retail-org/customers")
    )

@dp.materialized_view
def customer_orders() -> DataFrame:
    return (
        spark.table("orders")
        .join(
            spark.table("customers"), "customer_id")
            .select(
                "customer_id",
                "order_number",
                "state",
                col("order_datetime").cast("date").alias("order_date"),
            )
        )

@dp.materialized_view
def daily_orders_by_state() -> DataFrame:
    return (
        spark.table("customer_orders")
        .groupBy("state", "order_date")
        .count()
        .withColumnRenamed("count", "order_count")
    )
"""
MULTIPLE_FLOWS = """\
from pyspark import pipelines as dp
from pyspark.sql import DataFrame

# create a streaming table
dp.create_streaming_table("customers_us")

# define the first append flow
@dp.append_flow(target = "customers_us")
def append_customers_us_west() -> DataFrame:
    return spark.readStream.table("customers_us_west")

# define the second append flow
@dp.append_flow(target = "customers_us")
def append_customers_us_east() -> DataFrame:
    return spark.readStream.table("customers_us_east")
"""
# samples.tpch.* are JSON files here, read with spark.read.json.
FOR_LOOP = """\
from pyspark import pipelines as dp
from pyspark.sql import DataFrame
from pyspark.sql.functions import collect_list, col

@dp.temporary_view()
def customer_orders() -> DataFrame:
    orders = spark.read.json("/datasets/tpch/orders")
    customer = spark.read.json("/datasets/tpch/customer")

    return (
        orders
        .join(customer, orders.o_custkey == customer.c_custkey)
        .select(
            col("c_custkey").alias("custkey"),
            col("c_name").alias("name"),
            col("c_nationkey").alias("nationkey"),
            col("c_phone").alias("phone"),
            col("o_orderkey").alias("orderkey"),
            col("o_orderstatus").alias("orderstatus"),
            col("o_totalprice").alias("totalprice"),
            col("o_orderdate").alias("orderdate"),
        )
    )

@dp.temporary_view()
def nation_region() -> DataFrame:
    nation = spark.read.json("/datasets/tpch/nation")
    region = spark.read.json("/datasets/tpch/region")

    return (
        nation
        .join(region, nation.n_regionkey == region.r_regionkey)
        .select(
            col("n_name").alias("nation"),
            col("r_name").alias("region"),
            col("n_nationkey").alias("nationkey"),
        )
    )

# Extract region names from region table
region_list = spark.read.json("/datasets/tpch/region").select(collect_list("r_name")).collect()[0][0]

# Iterate through region names to create new region-specific materialized views
for region in region_list:
    @dp.table(name=f"{region.lower().replace(' ', '_')}_customer_orders")
    def regional_customer_orders(region_filter=region) -> DataFrame:
        customer_orders = spark.table("customer_orders")
        nation_region = spark.table("nation_region")

        return (
            customer_orders
            .join(nation_region, customer_orders.nationkey == nation_region.nationkey)
            .select(
                col("custkey"),
                col("name"),
                col("phone"),
                col("nation"),
                col("region"),
                col("orderkey"),
                col("orderstatus"),
                col("totalprice"),
                col("orderdate"),
            )
            .filter(f"region = '{region_filter}'")
        )
"""  # noqa: E501

# -- the guide's SQL examples ---------------------------------------------------------
SQL_MV = """\
CREATE MATERIALIZED VIEW basic_mv
AS SELECT * FROM trips;
"""
SQL_TV = """\
CREATE TEMPORARY VIEW basic_tv
AS SELECT * FROM trips;
"""
SQL_ST = """\
CREATE STREAMING TABLE basic_st
AS SELECT * FROM STREAM trips;
"""
SQL_QUERYING = """\
CREATE STREAMING TABLE orders
AS SELECT * FROM STREAM orders_source;

CREATE MATERIALIZED VIEW customers
AS SELECT * FROM customers_source;

CREATE MATERIALIZED VIEW customer_orders
AS SELECT
  c.customer_id,
  o.order_number,
  c.state,
  date(timestamp(int(o.order_datetime))) order_date
FROM orders o
INNER JOIN customers c
ON o.customer_id = c.customer_id;

CREATE MATERIALIZED VIEW daily_orders_by_state
AS SELECT state, order_date, count(*) order_count
FROM customer_orders
GROUP BY state, order_date;
"""
SQL_MULTIPLE_FLOWS = """\
-- create a streaming table
CREATE STREAMING TABLE customers_us;

-- define the first append flow
CREATE FLOW append_customers_us_west
AS INSERT INTO customers_us
SELECT * FROM STREAM(customers_us_west);

-- define the second append flow
CREATE FLOW append_customers_us_east
AS INSERT INTO customers_us
SELECT * FROM STREAM(customers_us_east);
"""

# -- what stands in for the tables outside the pipeline --------------------------------
ORDER_SCHEMA = "customer_id string, order_number string, order_datetime string"
SOURCES = """\
from pyspark import pipelines as dp
from pyspark.sql import DataFrame


def files(folder: str, schema: str) -> DataFrame:
    return spark.readStream.format("json").schema(schema).load(f"/datasets/{folder}")


@dp.table
def trips() -> DataFrame:
    return files("nyctaxi/trips", "trip_id long, pickup_zip int, fare_amount double")


@dp.table
def customers_us_west() -> DataFrame:
    return files("customers_us_west", "customer_id string, name string")


@dp.table
def customers_us_east() -> DataFrame:
    return files("customers_us_east", "customer_id string, name string")
"""
SQL_SOURCES = (
    SOURCES
    + """

@dp.table
def orders_source() -> DataFrame:
    return files("kafka/orders_epoch", ORDER_SCHEMA)


@dp.materialized_view
def customers_source() -> DataFrame:
    return spark.read.format("csv").option("header", True).load("/datasets/retail-org/customers")
"""
)


def _with_schema(code: str) -> str:
    return code.replace("ORDER_SCHEMA", json.dumps(ORDER_SCHEMA))


PROJECTS: dict[str, dict[str, str]] = {
    "python": {
        "sources.py": SOURCES,
        "basic_mv.py": BASIC_MV,
        "trips_mv.py": NAMED_MV,
        "basic_tv.py": BASIC_TV,
        "basic_st.py": BASIC_ST,
        "ingestion_st.py": _with_schema(INGESTION_ST),
        "batch_mv.py": BATCH_MV,
        "querying.py": _with_schema(QUERYING),
        "customers_us.py": MULTIPLE_FLOWS,
    },
    "loop": {"regions.py": FOR_LOOP},
    "sql": {
        "sources.py": _with_schema(SQL_SOURCES),
        "basic_mv.sql": SQL_MV,
        "basic_tv.sql": SQL_TV,
        "basic_st.sql": SQL_ST,
        "querying.sql": SQL_QUERYING,
        "customers_us.sql": SQL_MULTIPLE_FLOWS,
    },
}
DATASETS = {
    "python": (
        "trips", "customers_us_west", "customers_us_east", "basic_mv", "trips_mv", "basic_st",
        "ingestion_st", "batch_mv", "orders", "customers", "customer_orders",
        "daily_orders_by_state", "customers_us",
    ),
    "loop": ("africa_customer_orders", "europe_customer_orders", "america_customer_orders"),
    "sql": (
        "trips", "customers_us_west", "customers_us_east", "orders_source",
        "customers_source", "basic_mv", "basic_st", "orders", "customers",
        "customer_orders", "daily_orders_by_state", "customers_us",
    ),
}  # fmt: skip

TRIPS = [
    {"trip_id": 1, "pickup_zip": 10001, "fare_amount": 12.5},
    {"trip_id": 2, "pickup_zip": 10002, "fare_amount": 7.0},
    {"trip_id": 3, "pickup_zip": 10001, "fare_amount": 30.25},
]
ORDERS = [
    {"customer_id": "c1", "order_number": "n1", "order_datetime": "2024-03-01 09:00:00"},
    {"customer_id": "c2", "order_number": "n2", "order_datetime": "2024-03-01 17:30:00"},
    {"customer_id": "c1", "order_number": "n3", "order_datetime": "2024-03-02 08:15:00"},
    {"customer_id": "c3", "order_number": "n4", "order_datetime": "2024-03-02 11:00:00"},
]
ORDERS_EPOCH = [
    {"customer_id": "c1", "order_number": "n1", "order_datetime": "1709283600"},
    {"customer_id": "c2", "order_number": "n2", "order_datetime": "1709314200"},
    {"customer_id": "c1", "order_number": "n3", "order_datetime": "1709367300"},
    {"customer_id": "c3", "order_number": "n4", "order_datetime": "1709377200"},
]
CUSTOMERS_CSV = "customer_id,state,name\nc1,CA,Ann\nc2,NY,Bob\nc3,CA,Cid\n"
SALES_ORDERS = [
    {"order_number": "s1", "customer_id": "c1", "amount": 10},
    {"order_number": "s2", "customer_id": "c2", "amount": 25},
]
WEST = [{"customer_id": "w1", "name": "Wes"}, {"customer_id": "w2", "name": "Wyn"}]
EAST = [{"customer_id": "e1", "name": "Eve"}]
TPCH: dict[str, list[dict[str, Any]]] = {
    "region": [
        {"r_regionkey": 0, "r_name": "AFRICA"},
        {"r_regionkey": 1, "r_name": "AMERICA"},
        {"r_regionkey": 2, "r_name": "EUROPE"},
    ],
    "nation": [
        {"n_nationkey": 0, "n_name": "ALGERIA", "n_regionkey": 0},
        {"n_nationkey": 1, "n_name": "BRAZIL", "n_regionkey": 1},
        {"n_nationkey": 2, "n_name": "FRANCE", "n_regionkey": 2},
        {"n_nationkey": 3, "n_name": "GERMANY", "n_regionkey": 2},
    ],
    "customer": [
        {"c_custkey": 1, "c_name": "Customer#1", "c_nationkey": 0, "c_phone": "10-1"},
        {"c_custkey": 2, "c_name": "Customer#2", "c_nationkey": 2, "c_phone": "12-2"},
        {"c_custkey": 3, "c_name": "Customer#3", "c_nationkey": 3, "c_phone": "13-3"},
    ],
    "orders": [
        {"o_orderkey": 1, "o_custkey": 1, "o_orderstatus": "O", "o_totalprice": 10.5,
         "o_orderdate": "1996-01-02"},
        {"o_orderkey": 2, "o_custkey": 2, "o_orderstatus": "F", "o_totalprice": 20.0,
         "o_orderdate": "1996-12-01"},
        {"o_orderkey": 3, "o_custkey": 3, "o_orderstatus": "O", "o_totalprice": 5.25,
         "o_orderdate": "1997-03-04"},
        {"o_orderkey": 4, "o_custkey": 2, "o_orderstatus": "P", "o_totalprice": 7.75,
         "o_orderdate": "1997-05-06"},
    ],
}  # fmt: skip


def write_project(folder: Path, name: str) -> None:
    """Project ``name``'s files in ``folder``: its spec, the examples (with the guide's
    ``/datasets/`` paths under ``folder/data``) and its input data."""
    data = f"{folder.resolve()}/data/"
    files = {"spark-pipeline.yml": SPEC.format(name=name, folder=folder.resolve())}
    for file, code in PROJECTS[name].items():
        files[f"transformations/{file}"] = code.replace("/datasets/", data)
    inputs = {
        "nyctaxi/trips/part-0.json": _lines(TRIPS),
        "kafka/orders/part-0.json": _lines(ORDERS),
        "kafka/orders_epoch/part-0.json": _lines(ORDERS_EPOCH),
        "retail-org/customers/customers.csv": CUSTOMERS_CSV,
        "retail-org/sales_orders/part-0.json": _lines(SALES_ORDERS),
        "customers_us_west/part-0.json": _lines(WEST),
        "customers_us_east/part-0.json": _lines(EAST),
        **{f"tpch/{table}/part-0.json": _lines(rows) for table, rows in TPCH.items()},
    }
    files.update({f"data/{path}": text for path, text in inputs.items()})
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text, encoding="utf-8")


def _lines(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)
