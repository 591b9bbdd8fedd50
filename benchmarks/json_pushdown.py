"""What counting every record read costs a filtering flow over JSON lines.

Spark pushes a flow's filter into its JSON reader, which then skips the rest of a
record that fails it; its input rows (``numInputRows``) are then the rows the reader let
through, not the records read. Counting the records (an ``observe`` on the source, under
the filter) keeps the filter out of the reader. This script times both over one file of
``--records`` wide records (12 string fields and the filtered one) with a filter keeping
one in 300, as an available-now stream into the ``noop`` sink, and prints the median
of ``--runs`` each and what each reports as read.

    .venv/bin/python benchmarks/json_pushdown.py --records 300000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streamsmith.config import SparkSpec
from streamsmith.spark.session import build_session

FIELDS = 12
SCHEMA = ", ".join(f"f{i} string" for i in range(FIELDS)) + ", delay int"


def write_records(folder: Path, records: int) -> None:
    with (folder / "part-0.jsonl").open("w", encoding="utf-8") as out:
        for number in range(records):
            record = {f"f{i}": f"value-{number}-{i}" for i in range(FIELDS)}
            out.write(json.dumps({**record, "delay": number % 300}) + "\n")


def timed(spark: SparkSession, folder: Path, counted: bool) -> tuple[float, int]:
    """Seconds of one available-now run, and the records it says it read."""
    source = spark.readStream.schema(SCHEMA).json(str(folder))
    if counted:
        source = source.observe("read", F.count(F.lit(1)).alias("rows"))
    with tempfile.TemporaryDirectory() as checkpoint:
        query = (
            source.where("delay = 299")
            .writeStream.format("noop")
            .trigger(availableNow=True)
            .option("checkpointLocation", checkpoint)
            .start()
        )
        started = time.perf_counter()
        query.awaitTermination()
        seconds = time.perf_counter() - started
    progress = query.lastProgress
    observed = progress["observedMetrics"].get("read")
    return seconds, int(observed["rows"] if observed else progress["numInputRows"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    spark = build_session(SparkSpec(master="local[2]"), "bench-json-pushdown")
    with tempfile.TemporaryDirectory() as folder:
        write_records(Path(folder), args.records)
        timed(spark, Path(folder), counted=False)  # warm up
        results = {
            way: [timed(spark, Path(folder), counted=way == "counted") for _ in range(args.runs)]
            for way in ("pushed down", "counted")
        }
    print(f"{args.records} records, one in 300 kept; median of {args.runs} runs")
    for way, runs in results.items():
        seconds = statistics.median(run[0] for run in runs)
        print(f"{way:<12} {seconds:6.2f} s  reports {runs[0][1]} read")
    slower = statistics.median(r[0] for r in results["counted"]) / statistics.median(
        r[0] for r in results["pushed down"]
    )
    print(f"counting every record: {slower:.2f}x the time")


if __name__ == "__main__":
    main()
