"""One Spark Declarative Pipelines project run by SDP's own runner and by streamsmith (issue 51).

The project (``write_project``), written as an SDP user writes it (Python and SQL files
under ``transformations/``, a ``spark-pipeline.yml``): streaming tables reading JSON
files with ``spark.readStream`` (orders, customers, products), a streaming table over
another (``orders_silver``), an append-flow target (``order_lines``) fed by two
``@dp.append_flow``s (web and store orders, two folders), a SQL streaming table
(``big_orders``) and materialized views joining them (revenue by customer, in Python;
by category and region, in SQL). No AUTO CDC: SDP 4.2 with Delta refuses it
(``AUTOCDC_TARGET_DOES_NOT_SUPPORT_MERGE``).

The input (``--records`` orders, default 100,000, in ``--chunks`` JSON files per
folder, from a fixed seed) is generated under ``--workdir`` (a temporary folder unless
given; kept and reused by a later run with the same size). Then, each a whole cold
process from empty storage, alternating A B A B (``--runs`` rounds):

- A: ``spark-pipelines --conf <Delta's> run`` (``make peers-sdp`` installs it in
  ``.venv-sdp``), which starts a local Spark Connect server; its catalog is in memory,
  so every run gets a fresh folder;
- B: ``streamsmith run --trigger available-now`` in the same, unchanged project.

For each it prints wall seconds, CPU seconds (the rusage of every process reaped) and
the peak resident memory of the whole process tree and of the JVM (sampled from
``/proc``), as ``real_volume.py`` measures them, then the ratios, then checks that every
dataset of the last pair has the same columns and rows on both sides (exit 1 if not).

    .venv/bin/python benchmarks/sdp.py --runs 2
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from deltalake import DeltaTable
from real_volume import Side, add_pair_options, exit_in_workdir, print_table, run_pairs

HERE = Path(__file__).resolve().parent
SDP = HERE.parent / ".venv-sdp/bin/spark-pipelines"
DELTA = (
    "--conf", "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension",
    "--conf", "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "--conf", "spark.sql.sources.default=delta",
)  # fmt: skip
CUSTOMERS = 2_000
PRODUCTS = 500
CATEGORIES = ("books", "games", "garden", "kitchen", "music", "toys")
REGIONS = ("eu", "us", "apac")

SPEC = """\
name: shop
storage: file://{folder}/pipeline-storage
configuration:
  bench.input: "{inputs}"
  bench.min_cents: "500"
  spark.sql.shuffle.partitions: "2"
libraries:
  - glob:
      include: transformations/**
"""

BRONZE_PY = """\
from pyspark import pipelines as dp
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

INPUT = spark.conf.get("bench.input")
ORDER = (
    "order_id string, customer_id int, product_id int, quantity int, amount double,"
    " region string"
)


@dp.table(comment="customers as they are registered")
def customers() -> DataFrame:
    return (
        spark.readStream.format("json")
        .schema("customer_id int, name string, country string")
        .load(f"{INPUT}/customers")
    )


@dp.table
def products() -> DataFrame:
    return (
        spark.readStream.format("json")
        .schema("product_id int, title string, category string, cents long")
        .load(f"{INPUT}/products")
    )


dp.create_streaming_table("order_lines", comment="every order, from the web and the stores")
for channel in ("web", "store"):

    @dp.append_flow(target="order_lines", name=f"{channel}_orders")
    def orders() -> DataFrame:
        read = spark.readStream.format("json").schema(ORDER).load(f"{INPUT}/{channel}")
        cents = F.round(F.col("amount") * 100).cast("long")
        return read.withColumn("cents", cents).withColumn("channel", F.lit(channel))


@dp.table(partition_cols=["region"])
def orders_silver() -> DataFrame:
    floor = int(spark.conf.get("bench.min_cents"))
    return (
        spark.readStream.table("order_lines")
        .where(F.col("cents") >= floor)
        .select("order_id", "customer_id", "product_id", "quantity", "cents", "region")
    )


@dp.materialized_view
def revenue_by_customer() -> DataFrame:
    orders = spark.read.table("orders_silver")
    people = spark.read.table("customers")
    return (
        orders.join(people, "customer_id")
        .groupBy("customer_id", "name", "country")
        .agg(F.sum("cents").alias("cents"), F.count("*").alias("orders"))
    )
"""

GOLD_SQL = """\
CREATE STREAMING TABLE big_orders
COMMENT 'orders of 200 or more'
AS SELECT order_id, customer_id, cents FROM STREAM(orders_silver) WHERE cents >= 20000;

CREATE MATERIALIZED VIEW revenue_by_category AS
SELECT p.category, o.region, sum(o.cents) AS cents, sum(o.quantity) AS units, count(*) AS orders
FROM orders_silver o JOIN products p ON o.product_id = p.product_id
GROUP BY p.category, o.region;

CREATE MATERIALIZED VIEW top_customers AS
SELECT r.customer_id, r.name, r.cents, count(b.order_id) AS big_orders
FROM revenue_by_customer r LEFT JOIN big_orders b ON r.customer_id = b.customer_id
WHERE r.cents >= 1200000
GROUP BY r.customer_id, r.name, r.cents;
"""

DATASETS = (
    "customers",
    "products",
    "order_lines",
    "orders_silver",
    "big_orders",
    "revenue_by_customer",
    "revenue_by_category",
    "top_customers",
)


# -- the input and the project ------------------------------------------------------


def generate(folder: Path, records: int, chunks: int, seed: int = 51) -> None:
    """``records`` orders (two in three on the web, the rest in stores), the customers and
    products they name, each folder in ``chunks`` JSON-lines files written one at a time."""
    rng = random.Random(seed)

    def write(kind: str, items: list[dict[str, Any]]) -> None:
        (folder / kind).mkdir(parents=True, exist_ok=True)
        size = -(-len(items) // chunks)
        for number in range(chunks):
            part = items[number * size : (number + 1) * size]
            text = "".join(json.dumps(item, separators=(",", ":")) + "\n" for item in part)
            (folder / kind / f"part-{number:03d}.json").write_text(text, encoding="utf-8")

    write("customers", [
        {"customer_id": n, "name": f"customer {n}", "country": rng.choice(("de", "fr", "us", "jp"))}
        for n in range(CUSTOMERS)
    ])  # fmt: skip
    write("products", [
        {"product_id": n, "title": f"product {n}", "category": rng.choice(CATEGORIES),
         "cents": rng.randrange(100, 50_000)}
        for n in range(PRODUCTS)
    ])  # fmt: skip
    orders: dict[str, list[dict[str, Any]]] = {"web": [], "store": []}
    for number in range(records):
        channel = "web" if rng.randrange(3) else "store"
        orders[channel].append({
            "order_id": f"{channel[0]}{number}",
            "customer_id": rng.randrange(CUSTOMERS + 50),  # a few customers unknown
            "product_id": rng.randrange(PRODUCTS),
            "quantity": rng.randrange(1, 6),
            "amount": rng.randrange(50, 40_000) / 100,
            "region": rng.choice(REGIONS),
        })  # fmt: skip
    for channel, items in orders.items():
        write(channel, items)


def input_folder(workdir: Path, records: int, chunks: int) -> Path:
    """The input of this size under ``workdir``, generated unless a run left it there."""
    folder = workdir / f"input-{records}-{chunks}"
    if not (folder / "done").exists():
        started = time.perf_counter()
        generate(folder, records, chunks)
        (folder / "done").touch()
        size = sum(f.stat().st_size for f in folder.rglob("*.json")) / 1e6
        print(f"generated {records:,} orders ({size:.0f} MB, {chunks} files a folder) in "
              f"{time.perf_counter() - started:.1f} s", flush=True)  # fmt: skip
    return folder


def write_project(folder: Path, inputs: Path) -> None:
    """The SDP project in ``folder``, reading ``inputs``."""
    files = {
        "spark-pipeline.yml": SPEC.format(folder=folder.resolve(), inputs=inputs),
        "transformations/bronze.py": BRONZE_PY,
        "transformations/gold.sql": GOLD_SQL,
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")


# -- the two sides ------------------------------------------------------------------


def in_project(out: Path, inputs: Path, command: list[str], *env: str) -> list[str]:
    """``command`` run in a new project in ``out`` (``env -C``: the measuring spawn takes
    no working folder), without streamsmith's root, with ``env``'s options and settings."""
    write_project(out, inputs)
    return ["/usr/bin/env", "-C", str(out), "-u", "STREAMSMITH_ROOT", *env, *command]


def sdp_side(inputs: Path) -> Side:
    python = SDP.parent / "python"
    path = f"PATH={SDP.parent}:{os.environ.get('PATH', '')}"

    def command(out: Path) -> list[str]:
        sdp = [str(SDP), *DELTA, "run"]
        return in_project(out, inputs, sdp, "-u", "PYTHONPATH", f"PYSPARK_PYTHON={python}", path)

    return Side("spark-pipelines", command, lambda out: _tables(out / "spark-warehouse"))


def streamsmith_side(inputs: Path) -> Side:
    def command(out: Path) -> list[str]:
        run = [sys.executable, "-m", "streamsmith", "run", "--trigger", "available-now"]
        return in_project(out, inputs, run)

    return Side("streamsmith", command, lambda out: _tables(out / "pipeline-storage/tables"))


def _tables(folder: Path) -> dict[str, Path]:
    return {name: folder / name for name in DATASETS}


# -- the outputs, compared ----------------------------------------------------------


def contents(table: Path) -> tuple[list[str], Counter[tuple[Any, ...]]]:
    """A Delta table's columns and its rows as a multiset."""
    read = DeltaTable(str(table)).to_pyarrow_table()
    return read.column_names, Counter(tuple(row.values()) for row in read.to_pylist())


def check_equal(sides: list[Side], last: dict[str, Path]) -> bool:
    """Every dataset's columns and rows, the same on every side."""
    paths = [side.tables(last[side.name]) for side in sides]
    equal = True
    for name in DATASETS:
        found = [contents(tables[name]) for tables in paths]
        same = all(other == found[0] for other in found[1:])
        equal &= same
        counts = ", ".join(
            f"{side.name} {sum(rows.values()):,}"
            for side, (_, rows) in zip(sides, found, strict=True)
        )
        print(f"  {name:<22} {'equal' if same else 'DIFFERENT'}: {counts} rows")
        if any(columns != found[0][0] for columns, _ in found):
            print(f"    columns: {' against '.join(str(columns) for columns, _ in found)}")
    return equal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--chunks", type=int, default=10, help="JSON files per input folder")
    add_pair_options(parser)
    args = parser.parse_args()
    if not SDP.exists():
        raise SystemExit(f"{SDP} is missing: `make peers-sdp` installs SDP's runner")
    exit_in_workdir(args.workdir, "streamsmith-sdp-", lambda workdir: run(args, workdir))


def run(args: argparse.Namespace, workdir: Path) -> int:
    inputs = input_folder(workdir, args.records, args.chunks)
    print(f"load average before: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)", flush=True)
    sides = [sdp_side(inputs), streamsmith_side(inputs)]
    measured, last = run_pairs(sides, workdir, args.runs)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print_table(measured, sides[0].name)
    return 0 if check_equal(sides, last) else 1


if __name__ == "__main__":
    main()
