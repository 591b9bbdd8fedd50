"""What creating an empty Delta table costs, by Delta's builder in the JVM and by delta-rs,
and what the table's first appends cost after each.

streamsmith creates each table a flow writes before its query starts (so it can be read
and merged into before the first batch): several per pipeline, on every fresh run. This
script creates ``--tables`` partitioned tables of three columns each way in one warm
``local_session`` (the tests' JVM options), three rounds, and prints wall time per table
and CPU per table (the JVM's and this Python process's): by Delta's builder
(``DeltaTable.createIfNotExists``), by delta-rs alone (``deltalake.DeltaTable.create``),
and by ``io.delta.create_table`` (delta-rs, then the version's checksum file, which
delta-rs does not write). Then two one-row appends to each table
(``io.delta.append_batch``), per table: Delta rebuilds the state of a table whose last
version has no checksum with Spark jobs. The first round includes the JVM's warm-up.

    .venv/bin/python benchmarks/delta_create.py [--tables 20]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import jvm_pid, process_cpu
from delta.tables import DeltaTable
from deltalake import DeltaTable as RustTable
from deltalake import Schema
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from streamsmith.io.delta import append_batch, create_table
from streamsmith.testing import local_session

SCHEMA = StructType(
    [StructField("id", StringType()), StructField("n", LongType()),
     StructField("t", TimestampType())]
)  # fmt: skip


def by_delta(spark: SparkSession, folder: Path) -> None:
    builder = DeltaTable.createIfNotExists(spark).location(str(folder)).addColumns(SCHEMA)
    builder.partitionedBy("id").execute()


def by_delta_rs(spark: SparkSession, folder: Path) -> None:
    RustTable.create(str(folder), Schema.from_json(SCHEMA.json()), partition_by=["id"],
                     mode="ignore")  # fmt: skip


def by_streamsmith(spark: SparkSession, folder: Path) -> None:
    create_table(spark, folder, SCHEMA, ["id"])


WAYS = {"Delta (JVM)": by_delta, "delta-rs": by_delta_rs, "streamsmith": by_streamsmith}


def timed(pid: int, tables: int, action: Callable[[int], None]) -> tuple[float, float]:
    """Wall and CPU seconds (the JVM's and this process's) per table of ``action``."""
    cpu, wall = process_cpu(pid) + time.process_time(), time.perf_counter()
    for index in range(tables):
        action(index)
    cpu = process_cpu(pid) + time.process_time() - cpu
    return (time.perf_counter() - wall) / tables, cpu / tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=20)
    args = parser.parse_args()
    spark = local_session()
    pid = jvm_pid(spark)
    row = spark.createDataFrame([("a", 1, None)], SCHEMA)
    print(f"{args.tables} empty partitioned tables per round, one warm local[2] JVM; per table")
    print(f"{'round':<7}{'created by':<16}{'create wall s':>14}{'CPU s':>8}"
          f"{'2 appends wall s':>18}{'CPU s':>8}")  # fmt: skip
    for round_ in range(1, 4):
        with tempfile.TemporaryDirectory(prefix="delta-create-") as tmp:
            rows = {}
            for way, create in WAYS.items():
                folder = Path(tmp, way.split()[0])

                def appends(index: int, folder: Path = folder) -> None:
                    for batch in range(2):
                        append_batch(row, folder / str(index), "bench", batch, ["id"])

                made = timed(pid, args.tables, lambda i, f=folder, c=create: c(spark, f / str(i)))
                rows[way] = (*made, *timed(pid, args.tables, appends))
            schemas = {
                str(spark.read.format("delta").load(str(Path(tmp, way.split()[0], "0"))).schema)
                for way in WAYS
            }
        if len(schemas) != 1:
            raise SystemExit(f"the tables read back differently: {schemas}")
        for way, figures in rows.items():
            widths = (14, 8, 18, 8)
            cells = (f"{value:>{width}.3f}" for value, width in zip(figures, widths, strict=True))
            print(f"{round_:<7}{way:<16}" + "".join(cells))


if __name__ == "__main__":
    main()
