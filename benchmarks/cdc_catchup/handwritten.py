"""The ``customers`` table of ``streamsmith.yml`` beside this file, written by hand in
plain PySpark and Delta Lake: the classic SCD type 1 upsert, for
``benchmarks/cdc_catchup.py`` to time beside ``streamsmith run``.

One query reads the folder of change events as JSON with a schema (``availableNow``);
``foreachBatch`` keeps each key's latest event by ``seq`` and MERGEs it into the table: a
newer event updates the key's row or, a delete, removes it; an unknown key's event
inserts it unless it is a delete. The sequence conditions make a replayed batch change
nothing. Unlike streamsmith it keeps no tombstones: an update older than a delete that
arrives in a later micro-batch than the delete brings the key back.

    python handwritten.py INPUT OUTPUT --conf spark.jars=a.jar,b.jar --conf ...
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

SCHEMA = "id int, name string, tier string, balance int, op string, seq long"
COLUMNS = ("id", "name", "tier", "balance", "seq")  # the table's: op left out
VALUES = {column: f"s.{column}" for column in COLUMNS}


def upsert(table: str) -> Callable[[DataFrame, int], None]:
    def write(batch: DataFrame, batch_id: int) -> None:
        newest = Window.partitionBy("id").orderBy(F.col("seq").desc())
        latest = batch.withColumn("_n", F.row_number().over(newest)).where("_n = 1")
        (
            DeltaTable.forPath(batch.sparkSession, table)
            .alias("t")
            .merge(latest.alias("s"), "t.id = s.id")
            .whenMatchedDelete("s.op = 'delete' AND s.seq > t.seq")
            .whenMatchedUpdate("s.op <> 'delete' AND s.seq > t.seq", VALUES)
            .whenNotMatchedInsert("s.op <> 'delete'", VALUES)
            .execute()
        )

    return write


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--conf", action="append", default=[], help="a Spark setting, key=value")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master("local[*]")
        .appName("handwritten-cdc")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(os.cpu_count() or 2))
        .config("spark.ui.showConsoleProgress", "false")
    )
    for setting in args.conf:
        key, value = setting.split("=", 1)
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    table = f"{args.output}/customers"
    schema = StructType.fromDDL(SCHEMA)
    kept = StructType([field for field in schema if field.name in COLUMNS])
    DeltaTable.createIfNotExists(spark).location(table).addColumns(kept).execute()
    query = (
        spark.readStream.schema(schema)
        .json(args.input)
        .writeStream.foreachBatch(upsert(table))
        .option("checkpointLocation", f"{args.output}/_checkpoints/customers")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
