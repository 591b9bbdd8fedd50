"""Child process of the Delta crash test: running totals per key, merged into a Delta
table batch by batch (or the rows themselves appended, as a flow's quarantine and late
events are), killed (optionally) right after one batch's Delta commit and before the
checkpoint records the batch.

Run as ``python delta_merge_child.py INPUT CHECKPOINT TABLE MODE KILL_AT`` with MODE
``update``, ``complete`` or ``append`` and KILL_AT a batch id (``-1``: never); an
available-now run that ends exits 0.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from streamsmith.config import SparkSpec
from streamsmith.io import delta
from streamsmith.spark.session import build_session

APP_ID = "delta-merge-child"


def run(source: str, checkpoint: str, table: str, mode: str, kill_at: str) -> None:
    spark = build_session(
        SparkSpec(master="local[2]", conf={"spark.sql.shuffle.partitions": 2}), "delta-crash"
    )
    start(spark, source, checkpoint, table, mode, kill_at).awaitTermination()


def start(
    spark: SparkSession, source: str, checkpoint: str, table: str, mode: str, kill_at: str
) -> StreamingQuery:
    """The query, started in ``spark`` (a restart runs in the test's own session)."""
    path = Path(table)
    rows = spark.readStream.schema("key string, amount long").option("maxFilesPerTrigger", 1)
    rows = rows.json(source)
    totals = rows.groupBy("key").sum("amount").withColumnRenamed("sum(amount)", "total")
    if mode == "append":
        totals = rows
    delta.create_table(spark, path, totals.schema)

    def write(batch: DataFrame, batch_id: int) -> None:
        if mode == "append":
            delta.append_batch(batch, path, APP_ID, batch_id)
        elif mode == "update":
            delta.merge_batch(batch, path, ["key"], APP_ID, batch_id)
        else:
            delta.overwrite_batch(batch, path, APP_ID, batch_id)
        if batch_id == int(kill_at):  # the Delta commit is made, the checkpoint's is not
            os.kill(os.getpid(), signal.SIGKILL)

    return (
        totals.writeStream.outputMode(mode)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .foreachBatch(write)
        .start()
    )


if __name__ == "__main__":
    run(*sys.argv[1:])
