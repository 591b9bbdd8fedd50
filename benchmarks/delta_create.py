"""What creating an empty Delta table costs, by Delta's builder in the JVM and by delta-rs.

streamsmith creates each table a flow writes before its query starts (so it can be read
and merged into before the first batch): several per pipeline, on every fresh run. This
script creates ``--tables`` partitioned tables of three columns each way in one warm
``local_session`` (the tests' JVM options), three rounds, and prints wall time per table
and CPU per table: the JVM's for Delta's builder (``DeltaTable.createIfNotExists``), this
Python process's for delta-rs (``deltalake.DeltaTable.create``, what
``io.delta.create_table`` uses for a table without properties or clustering). The
first round includes the JVM's warm-up.

    .venv/bin/python benchmarks/delta_create.py [--tables 20]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _common import jvm_pid, process_cpu
from delta.tables import DeltaTable
from deltalake import DeltaTable as RustTable
from deltalake import Schema
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from streamsmith.testing import local_session

SCHEMA = StructType(
    [StructField("id", StringType()), StructField("n", LongType()),
     StructField("t", TimestampType())]
)  # fmt: skip


def by_delta(spark: SparkSession, pid: int, folder: Path, tables: int) -> tuple[float, float]:
    """Wall and JVM CPU seconds per table created by Delta's builder."""
    cpu, wall = process_cpu(pid), time.perf_counter()
    for index in range(tables):
        builder = DeltaTable.createIfNotExists(spark).location(str(folder / f"jvm{index}"))
        builder.addColumns(SCHEMA).partitionedBy("id").execute()
    return (time.perf_counter() - wall) / tables, (process_cpu(pid) - cpu) / tables


def by_delta_rs(folder: Path, tables: int) -> tuple[float, float]:
    """Wall and Python CPU seconds per table created by delta-rs."""
    cpu, wall = time.process_time(), time.perf_counter()
    for index in range(tables):
        RustTable.create(str(folder / f"rs{index}"), Schema.from_json(SCHEMA.json()),
                         partition_by=["id"], mode="ignore")  # fmt: skip
    return (time.perf_counter() - wall) / tables, (time.process_time() - cpu) / tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=20)
    args = parser.parse_args()
    spark = local_session()
    pid = jvm_pid(spark)
    print(f"{args.tables} empty partitioned tables per round, one warm local[2] JVM; per table")
    print(f"{'round':<7}{'created by':<16}{'wall s':>8}{'CPU s':>8}")
    for round_ in range(1, 4):
        with tempfile.TemporaryDirectory(prefix="delta-create-") as tmp:
            rows = {"Delta (JVM)": by_delta(spark, pid, Path(tmp), args.tables),
                    "delta-rs": by_delta_rs(Path(tmp), args.tables)}  # fmt: skip
            schemas = {
                str(spark.read.format("delta").load(str(Path(tmp, name))).schema)
                for name in ("jvm0", "rs0")
            }
        if len(schemas) != 1:
            raise SystemExit(f"the two tables read back differently: {schemas}")
        for way, (wall, cpu) in rows.items():
            print(f"{round_:<7}{way:<16}{wall:>8.3f}{cpu:>8.3f}")


if __name__ == "__main__":
    main()
