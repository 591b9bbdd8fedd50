"""Where CloudTrail ETL time goes: each stage of the flow timed as a batch job.

Every stage is run to completion with Spark's ``noop`` sink (which computes all columns
but writes nothing), warm (the best of ``--repeats`` runs in one session), so the
differences between consecutive lines are the cost of each step.

    .venv/bin/python benchmarks/cloudtrail_stages.py --files 200 --records-per-file 500
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamsmith.config import SourceSpec, SparkSpec
from streamsmith.generate.cloudtrail import generate_cloudtrail
from streamsmith.io.files import read_files
from streamsmith.schemas.cloudtrail import CLOUDTRAIL_RECORD_SCHEMA
from streamsmith.spark.session import build_session
from streamsmith.transforms.cloudtrail import (
    PERMISSIVE,
    RECORD,
    explode_cloudtrail_records,
    flatten_cloudtrail_records,
)
from streamsmith.transforms.quarantine import RAW, accepted, quarantined


def best_of(repeats: int, action: Callable[[], None]) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        timings.append(time.perf_counter() - started)
    return min(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--records-per-file", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="streamsmith-stages-") as tmp:
        inbox = Path(tmp) / "in"
        report = generate_cloudtrail(
            inbox, files=args.files, records_per_file=args.records_per_file, seed=1,
            corrupt_fraction=0.01, collect_ids=False,
        )  # fmt: skip
        records = report.valid_records + report.quarantine_rows
        spark = build_session(SparkSpec(master=args.master), "streamsmith-stages")
        documents = read_files(
            spark, SourceSpec(format="json", path=str(inbox)), str(inbox), None, streaming=False
        )
        exploded = explode_cloudtrail_records(documents)
        tagged = flatten_cloudtrail_records(exploded)
        # The alternative plan: parse records in a projection after the explode.
        reparsed = flatten_cloudtrail_records(
            exploded.withColumn(RECORD, F.from_json(RAW, CLOUDTRAIL_RECORD_SCHEMA, PERMISSIVE))
        )

        def noop(frame: DataFrame) -> Callable[[], None]:
            return lambda: frame.write.format("noop").mode("overwrite").save()

        def parquet(frame: DataFrame, partition_by: tuple[str, ...]) -> Callable[[], None]:
            target = Path(tmp) / "out"

            def write() -> None:
                shutil.rmtree(target, ignore_errors=True)
                frame.write.partitionBy(*partition_by).parquet(str(target))

            return write

        stages = [
            ("read + gunzip/decode (Arrow UDF)", noop(documents)),
            ("+ parse documents, explode records", noop(exploded)),
            ("+ validate and flatten (all rows)", noop(tagged)),
            ("accepted rows only (table query)", noop(accepted(tagged))),
            ("quarantined rows only (quarantine)", noop(quarantined(tagged))),
            ("accepted, if parsed after explode", noop(accepted(reparsed))),
            ("accepted -> Parquet by date", parquet(accepted(tagged), ("date",))),
        ]
        print(f"input: {args.files} files, {records} records; master {args.master}")
        print(
            f"{'stage (batch, warm, best of ' + str(args.repeats) + ')':<40}{'s':>7}{'rec/s':>12}"
        )
        for name, action in stages:
            seconds = best_of(args.repeats, action)
            print(f"{name:<40}{seconds:>7.2f}{records / seconds:>12,.0f}")
        spark.stop()


if __name__ == "__main__":
    main()
