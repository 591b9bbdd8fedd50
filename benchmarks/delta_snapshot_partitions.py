"""What Delta's snapshot partitions cost a small table on a few local cores.

Delta rebuilds a table's list of files (its snapshot) with a shuffle into
``spark.databricks.delta.snapshotPartitions`` partitions, 50 unless set: on ``local[2]``
that is 50 tasks each time a small table is read, merged into or checkpointed.
streamsmith sets it to the session's shuffle partitions (the local cores, at least 2) on
local masters. This script times the same small-table work under both settings, side by
side in one session (the setting is a SQL conf), in alternating rounds: ``--commits``
appends of 10 rows, then 10 reads, then 5 MERGEs of 5 rows, each on a fresh table.

    .venv/bin/python benchmarks/delta_snapshot_partitions.py --rounds 3

``--setting KEY=VALUE`` times another Delta SQL conf the same way, against the session's
value (e.g. ``spark.databricks.delta.writeChecksumFile.enabled=false``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from _common import timed_rounds
from pyspark.sql import SparkSession

from streamsmith.config import SparkSpec
from streamsmith.spark.session import DELTA_SNAPSHOT_PARTITIONS, build_session

SETTINGS = {"Delta's default (50)": None, "streamsmith's (2 on local[2])": "2"}


def small_table_work(spark: SparkSession, table: Path, commits: int) -> dict[str, float]:
    """Seconds of appends, reads and merges on a new table at ``table``."""
    from delta.tables import DeltaTable

    seconds = {}
    started = time.perf_counter()
    for i in range(commits):
        spark.range(i * 10, i * 10 + 10).write.format("delta").mode("append").save(str(table))
    seconds["appends"] = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(10):
        spark.read.format("delta").load(str(table)).count()
    seconds["reads"] = time.perf_counter() - started
    started = time.perf_counter()
    for i in range(5):
        (
            DeltaTable.forPath(spark, str(table))
            .alias("t")
            .merge(spark.range(i, i + 5).alias("s"), "t.id = s.id")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )
    seconds["merges"] = time.perf_counter() - started
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--commits", type=int, default=15)
    parser.add_argument("--setting", help="KEY=VALUE against the session's own value")
    args = parser.parse_args()
    key, settings = DELTA_SNAPSHOT_PARTITIONS, SETTINGS
    if args.setting:
        key, value = args.setting.split("=", 1)
        settings = {"the session's": None, args.setting: value}
    spark = build_session(SparkSpec(master="local[2]", log_level="ERROR"), "delta-partitions")
    root = Path(tempfile.mkdtemp(prefix="delta-partitions-"))
    results: dict[str, list[dict[str, float]]] = {name: [] for name in settings}
    kept = spark.conf.get(key, None)
    tables = iter(range(1_000_000))

    def run(name: str, value: str | None) -> None:
        if value is None and (args.setting is None or kept is None):
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value if value is not None else kept)
        results[name].append(small_table_work(spark, root / f"t{next(tables)}", args.commits))

    actions = {name: (lambda n=name, v=value: run(n, v)) for name, value in settings.items()}
    timed_rounds(args.rounds, actions)
    print(f"local[2], {args.rounds} rounds, median seconds; {args.commits} appends of 10 "
          "rows, 10 reads, 5 merges of 5 rows")  # fmt: skip
    for name, rounds in results.items():
        medians = {step: statistics.median(r[step] for r in rounds) for step in rounds[0]}
        figures = ", ".join(f"{step} {value:.1f}" for step, value in medians.items())
        print(f"  {name:32s} {figures}")
    spark.stop()


if __name__ == "__main__":
    main()
