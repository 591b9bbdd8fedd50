"""The flights pipeline's outputs written by hand in plain PySpark and Delta Lake: what a
careful engineer writes for the same tables and guarantees (every rejected line kept
with its reason, exactly once), for ``benchmarks/real_volume.py`` to time beside
``streamsmith run``.

Two queries over the input: the daily aggregate (a stateful windowed aggregation needs
Spark's state store, so its own query), and a ``foreachBatch`` writing the filter table
and the quarantine from one cached read, each an idempotent Delta append by batch id.
Records are read as text and parsed with ``from_json``, so a rejected record keeps its
line as it arrived.

    python handwritten.py INPUT OUTPUT --jars a.jar,b.jar
"""

from __future__ import annotations

import argparse
import os
import sys

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

SCHEMA = (
    "flight string, origin string, dest string, date timestamp, dep_delay int, "
    "arr_delay int, distance int, _corrupt string"
)
PARSE = {
    "mode": "PERMISSIVE",
    "columnNameOfCorruptRecord": "_corrupt",
    "timestampFormat": "yyyy-MM-dd HH:mm",
}
APP_ID = "handwritten-flights"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def flights(spark: SparkSession, folder: str) -> DataFrame:
    """Every line of the input with its record parsed and why it is rejected (null:
    accepted)."""
    lines = spark.readStream.format("text").load(folder)
    record = F.from_json("value", StructType.fromDDL(SCHEMA), PARSE)
    parsed = lines.select(F.col("value").alias("raw"), record.alias("r")).select("raw", "r.*")
    return parsed.withColumn("reason", _reason())


def _reason() -> Column:
    return F.coalesce(
        F.when(F.col("_corrupt").isNotNull(), F.lit("malformed record")),
        *(F.when(F.col(c).isNull(), F.lit(f"missing {c}")) for c in ("flight", "origin", "date")),
    )


def daily_delays(records: DataFrame) -> DataFrame:
    """The accepted records that pass both expectations, per origin and day."""
    kept = records.where("reason IS NULL AND distance > 0 AND origin <> dest")
    return (
        kept.withWatermark("date", "3 days")
        .groupBy(F.window("date", "1 day"), "origin")
        .agg(
            F.count(F.lit(1)).alias("flights"),
            F.sum("arr_delay").alias("total_arr_delay"),
            F.max("dep_delay").alias("max_dep_delay"),
        )
    )


def write_filter_and_quarantine(out: str) -> object:
    def write(batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        try:
            accepted = batch.where("reason IS NULL")
            long_delays = accepted.where("arr_delay > 120").select(
                "flight", "origin", "dest", "date", "arr_delay"
            )
            failed = accepted.where("NOT (origin <> dest) OR (origin <> dest) IS NULL")
            rejects = (
                batch.where("reason IS NOT NULL")
                .select("reason", "raw")
                .unionByName(failed.select(F.lit("real_route").alias("reason"), "raw"))
            )
            for frame, table in ((long_delays, "long_delays"), (rejects, "quarantine")):
                (
                    frame.write.format("delta")
                    .mode("append")
                    .option("txnAppId", APP_ID)
                    .option("txnVersion", batch_id)
                    .save(f"{out}/{table}")
                )
        finally:
            batch.unpersist()

    return write


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--jars", required=True, help="Delta Lake's jars, comma-separated")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[*]")
        .appName("handwritten-flights")
        .config("spark.jars", args.jars)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(os.cpu_count() or 2))
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    out = args.output
    records = flights(spark, args.input)
    aggregate = (
        daily_delays(records)
        .writeStream.format("delta")
        .outputMode("append")
        .option("checkpointLocation", f"{out}/_checkpoints/daily_delays")
        .trigger(availableNow=True)
        .start(f"{out}/daily_delays")
    )
    others = (
        records.writeStream.foreachBatch(write_filter_and_quarantine(out))
        .option("checkpointLocation", f"{out}/_checkpoints/filter")
        .trigger(availableNow=True)
        .start()
    )
    aggregate.awaitTermination()
    others.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
