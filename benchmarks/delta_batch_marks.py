"""What Delta's idempotent-write check costs a small micro-batch in a warm JVM.

Delta's streaming sink, and a ``foreachBatch`` write with ``txnAppId``/``txnVersion``,
ask the table for the query's last committed batch (``txnVersion``). Delta 4.4.0 answers
from the snapshot's full state, which it rebuilds (Spark jobs) after every commit. This
script writes ``--batches`` one-row micro-batches from a file source four ways, in one
``local_session`` (the tests' JVM options), three rounds alternating, and prints the
driver JVM's CPU per batch over the last two rounds (the first warms the JVM):

- ``delta sink``: Delta's streaming sink (what streamsmith's append flows use);
- ``delta txn marks``: ``foreachBatch`` append with ``txnAppId``/``txnVersion``
  (what streamsmith's merges, overwrites, quarantine and late-event appends did before);
- ``streamsmith marks``: ``foreachBatch`` through ``io.delta.append_batch``, the batch id
  in the commit's ``userMetadata`` and checked in Python by delta-rs (what they do now:
  ``io.delta_marks``);
- ``parquet``: ``foreachBatch`` append to Parquet, the floor.

    .venv/bin/python benchmarks/delta_batch_marks.py [--batches 20]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

from _common import jvm_pid, one_row_batches
from pyspark.sql import DataFrame, DataFrameWriter, SparkSession

from streamsmith.io.delta import append_batch
from streamsmith.testing import local_session

Marks = Callable[[DataFrameWriter, int], DataFrameWriter]
WAYS: dict[str, tuple[str, Marks | None]] = {
    "delta sink": ("delta", None),
    "delta txn marks": (
        "delta",
        lambda w, batch: w.option("txnAppId", "q").option("txnVersion", str(batch)),
    ),
    "streamsmith marks": ("delta", None),
    "parquet": ("parquet", lambda w, _batch: w),
}


def one_round(spark: SparkSession, pid: int, way: str, batches: int) -> tuple[float, float]:
    """Wall and JVM CPU seconds of ``batches`` one-row batches written ``way``."""
    fmt, marks = WAYS[way]
    with tempfile.TemporaryDirectory(prefix="batch-marks-") as tmp:
        folder, table = Path(tmp, "in"), str(Path(tmp, "table"))
        folder.mkdir()
        (folder / "0.json").write_text('{"n": 0}\n')
        stream = spark.readStream.schema("n long").json(str(folder))
        checkpoint = str(Path(tmp, "checkpoint"))
        if way == "delta sink":
            writer = stream.writeStream.format(fmt).option("path", table)
        elif marks is None:

            def append(frame: DataFrame, batch: int) -> None:
                append_batch(frame, Path(table), "q", batch)

            writer = stream.writeStream.foreachBatch(append)
        else:
            marked = marks

            def write(frame: DataFrame, batch: int) -> None:
                marked(frame.write.format(fmt).mode("append"), batch).save(table)

            writer = stream.writeStream.foreachBatch(write)
        query = writer.option("checkpointLocation", checkpoint).start()
        wall, cpu = one_row_batches(query, folder, batches, pid)
        query.stop()
        rows = spark.read.format(fmt).load(table).count()
    if rows != batches + 1:
        raise SystemExit(f"{way}: {rows} rows, not {batches + 1}")
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=20)
    args = parser.parse_args()
    spark = local_session()
    pid = jvm_pid(spark)
    figures: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    for round_ in range(3):
        for way in WAYS:
            measured = one_round(spark, pid, way, args.batches)
            if round_:  # the first round warms the JVM
                figures[way].append(measured)
    print(f"{args.batches} one-row micro-batches per round, one warm local[2] JVM, "
          "rounds 2-3 of 3, alternating; per batch")  # fmt: skip
    print(f"{'written as':<22}{'wall s':>8}{'JVM CPU s':>11}")
    for way, runs in figures.items():
        wall = statistics.mean(w for w, _ in runs) / args.batches
        cpu = statistics.mean(c for _, c in runs) / args.batches
        print(f"{way:<22}{wall:>8.2f}{cpu:>11.2f}")


if __name__ == "__main__":
    main()
