"""What Hadoop's child processes cost small micro-batches on a local disk.

Spark ships without Hadoop's native library, so Hadoop's local file system starts a
``chmod`` process for each file and folder it creates and a ``readlink`` process before
each rename (every checkpoint file, every Delta commit). streamsmith's local sessions use
``io.streamsmith.fs.LocalFileSystemInJvm``, which does both in the JVM. This script runs
``--batches`` one-row micro-batches from a file source into a Delta table (Delta's
streaming sink) and into Parquet, on a ``local[2]`` session in a process of its own, once
with Hadoop's file system (set back through the spec's conf, as a user could) and once
with streamsmith's, alternating; it prints the median wall time and the driver JVM's CPU
time (its own and its child processes', from ``/proc``) over the batches.

    .venv/bin/python benchmarks/local_files.py [--batches 40] [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import jvm_pid, one_row_batches

from streamsmith.spark.session import LOCAL_FILES_IN_JVM

HADOOPS = {
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.LocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.LocalFs",
}
SYSTEMS = {"Hadoop's": HADOOPS, "streamsmith's": LOCAL_FILES_IN_JVM}
SINKS = ("delta", "parquet")


def child(system: str, sink: str, batches: int) -> None:
    """One run: prints its wall and JVM CPU seconds as JSON."""
    from streamsmith.config import SparkSpec
    from streamsmith.spark.session import build_session

    spark = build_session(
        SparkSpec(master="local[2]", log_level="ERROR", conf=dict(SYSTEMS[system])), "files"
    )
    pid = jvm_pid(spark)
    with tempfile.TemporaryDirectory(prefix="local-files-") as tmp:
        folder, table = Path(tmp, "in"), Path(tmp, "table")
        folder.mkdir()
        (folder / "0.json").write_text('{"n": 0}\n')
        query = (
            spark.readStream.schema("n long").json(str(folder)).writeStream.format(sink)
            .option("checkpointLocation", str(Path(tmp, "checkpoint"))).start(str(table))
        )  # fmt: skip
        wall, cpu = one_row_batches(query, folder, batches, pid)
        query.stop()
        rows = spark.read.format(sink).load(str(table)).count()
    if rows != batches + 1:
        raise SystemExit(f"{system} {sink}: {rows} rows, not {batches + 1}")
    print(json.dumps({"wall": wall, "cpu": cpu}))


def run(system: str, sink: str, batches: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", system, "--sink", sink,
               "--batches", str(batches)]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{system} {sink} failed:\n{result.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--child", choices=SYSTEMS)
    parser.add_argument("--sink", choices=SINKS, default="delta")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.sink, args.batches)
        return
    print(f"{args.batches} one-row micro-batches, local[2], {args.runs} run(s) each, "
          "alternating; medians")  # fmt: skip
    print(f"{'sink':<9}{'file system':<15}{'wall s':>8}{'JVM CPU s':>11}{'CPU/batch':>11}")
    for sink in SINKS:
        results: dict[str, list[dict[str, float]]] = {system: [] for system in SYSTEMS}
        for _ in range(args.runs):
            for system in SYSTEMS:
                results[system].append(run(system, sink, args.batches))
        for system, runs in results.items():
            wall = statistics.median(r["wall"] for r in runs)
            cpu = statistics.median(r["cpu"] for r in runs)
            print(f"{sink:<9}{system:<15}{wall:>8.1f}{cpu:>11.1f}{cpu / args.batches:>11.2f}")


if __name__ == "__main__":
    main()
