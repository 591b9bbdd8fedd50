"""Interactive reads: ``streamsmith query`` on the fast path (DuckDB) and on Spark, and the
everyday commands, each as a user runs it (a fresh process, its start included).

For each size, CloudTrail files are generated (``streamsmith generate cloudtrail``) and
one available-now run writes the ``cloudtrail_events`` table; then every query is timed
with ``--engine duckdb`` (median of ``--runs``) and ``--engine spark`` (median of
``--spark-runs``: each starts a JVM), after checking that both print the same rows.
The everyday commands are timed over the first size's storage root. Each process starts
as an installed package does, from cached bytecode (the first run writes it).

    .venv/bin/python benchmarks/interactive.py --sizes 100000,1000000
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from streamsmith.io.lake_paths import is_table

RECORDS_PER_FILE = 1000
QUERIES = {
    "group-by": "SELECT eventName, count(*) AS n FROM cloudtrail_events "
    "GROUP BY 1 ORDER BY n DESC, 1 LIMIT 3",
    "distinct": "SELECT awsRegion, count(DISTINCT userIdentity_userName) AS users "
    "FROM cloudtrail_events "
    "GROUP BY 1 ORDER BY 1",
    "filter": "SELECT eventID, eventTime, eventName FROM cloudtrail_events WHERE errorCode "
    "IS NOT NULL AND date = DATE '2026-11-21' ORDER BY eventTime DESC, eventID LIMIT 10",
    "window fn": "SELECT eventName, n, rank() OVER (ORDER BY n DESC) AS r FROM (SELECT "
    "eventName, count(*) AS n FROM cloudtrail_events GROUP BY 1) ORDER BY r, eventName LIMIT 5",
}
_NOT_PASSED = ("STREAMSMITH_ROOT", "PYTHONDONTWRITEBYTECODE")
EVERYDAY = {
    "--help": ["--help"],
    "apps": ["apps"],
    "dry-run": ["dry-run", "cloudtrail", "--root", "{root}"],
    "status": ["status", "cloudtrail", "--root", "{root}"],
    "checkpoint show": ["checkpoint", "show", "cloudtrail", "--root", "{root}"],
}


def streamsmith(*args: str) -> tuple[float, float, str]:
    """Wall and CPU seconds (user + system, its children included) of one ``streamsmith``
    command in a fresh process, and its stdout. On a shared machine the CPU time is what
    the wall time would be without the other jobs (the fast path runs on one core)."""
    # PYTHONDONTWRITEBYTECODE (set on some shared machines) would compile streamsmith's
    # modules anew at every start; an installed package has its bytecode.
    env = {k: v for k, v in os.environ.items() if k not in _NOT_PASSED}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "streamsmith", *args],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if done.returncode != 0:
        sys.exit(f"streamsmith {' '.join(args)} failed:\n{done.stderr}")
    return seconds, cpu, done.stdout


def median_seconds(runs: int, *args: str) -> tuple[float, float, str]:
    """Median wall and CPU seconds of ``runs`` fresh processes, and the last stdout."""
    walls, cpus, output = [], [], ""
    for _ in range(runs):
        seconds, cpu, output = streamsmith(*args)
        walls.append(seconds)
        cpus.append(cpu)
    return statistics.median(walls), statistics.median(cpus), output


def build_lake(root: Path, records: int) -> float | None:
    """Generate ``records`` CloudTrail records and write them with one available-now run;
    returns the run's seconds (None: a lake kept from an earlier run of the script)."""
    if is_table(root / "tables/cloudtrail_events"):
        return None
    files = max(1, records // RECORDS_PER_FILE)
    inbox = root / "input/cloudtrail"
    if not inbox.is_dir():
        streamsmith("generate", "cloudtrail", "--out", str(inbox), "--files", str(files),
                    "--records-per-file", str(RECORDS_PER_FILE))  # fmt: skip
    seconds, _, _ = streamsmith(
        "run", "cloudtrail", "--root", str(root), "--trigger", "available-now",
        "--set", "sources.cloudtrail_logs.max_files_per_trigger=250",
    )  # fmt: skip
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000", help="records, comma-separated")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per fast figure")
    parser.add_argument("--spark-runs", type=int, default=2, help="per Spark figure")
    parser.add_argument("--keep", type=Path, help="build the lakes here and keep them for reruns")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="interactive-") as scratch:
        folder = args.keep or Path(scratch)
        roots = {size: folder / f"lake-{size}" for size in sizes}
        for size, root in roots.items():
            seconds = build_lake(root, size)
            if seconds is not None:
                print(f"{size:,} records written by one available-now run in {seconds:.1f} s")
        print(f"\nstreamsmith query, wall seconds (fast: median of {args.runs}, "
              f"spark: median of {args.spark_runs}), process start included")  # fmt: skip
        print(f"load average before: {os.getloadavg()[0]:.1f} (2 cores shared with other jobs)")
        print(f"{'query':<12}{'rows':>11}{'duckdb':>9}{'cpu':>7}{'spark':>9}{'spark/duckdb':>14}")
        for size, root in roots.items():
            for name, sql in QUERIES.items():
                base = ["query", sql, "--root", str(root), "--format", "csv"]
                fast, cpu, fast_out = median_seconds(args.runs, *base, "--engine", "duckdb")
                slow, _, slow_out = median_seconds(args.spark_runs, *base, "--engine", "spark")
                if fast_out != slow_out:
                    sys.exit(f"{name}: the engines printed different rows:\n{fast_out}\n{slow_out}")
                print(
                    f"{name:<12}{size:>11,}{fast:>9.2f}{cpu:>7.2f}{slow:>9.2f}{slow / fast:>14.1f}"
                )
        first = str(roots[sizes[0]])
        print(f"\neveryday commands, seconds (median of {args.runs})")
        print(f"{'command':<18}{'wall':>6}{'cpu':>7}")
        for name, command in EVERYDAY.items():
            wall, cpu, _ = median_seconds(args.runs, *(part.format(root=first) for part in command))
            print(f"{name:<18}{wall:>6.2f}{cpu:>7.2f}")
        print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
