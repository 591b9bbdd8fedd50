"""What a cold start costs, with and without the JVM class-data-sharing archive.

Every scheduled ``available-now`` catch-up, ``backfill`` and ``query`` is a fresh process
with a fresh JVM. This script times, in fresh processes (``--runs`` each, interleaved so
the machine's state favours neither):

- ``session``: importing PySpark, starting the driver JVM and the SparkSession;
- ``first query``: the first query over a small Parquet table (code generation, the
  first tasks);
- ``run``: ``streamsmith run --trigger available-now`` of the ``streamsmith init``
  project (four queries over its sample);
- ``query``: ``streamsmith query`` over the table that run wrote;
- ``nothing new``: the same catch-up again, with no new input: decided from the
  checkpoint and the input folder before Spark starts; ``nothing new, Spark`` is that
  run with the check off (``STREAMSMITH_NOTHING_NEW_CHECK=off``), as it was before:
  Spark starts, plans the four queries and finds nothing;

each with the archive (``streamsmith jvm build`` must have run: ``make setup`` does) and
without it (``STREAMSMITH_JVM_ARCHIVE=off``), and prints the medians.

    .venv/bin/python benchmarks/cold_start.py --runs 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from streamsmith.runtime import catchup
from streamsmith.scaffold import init_project
from streamsmith.spark import jvm_archive

# A child process timing its own session start and first query, in seconds (one line).
PROBE = """
import time
started = time.perf_counter()
from streamsmith.config import SparkSpec
from streamsmith.spark.session import build_session
spark = build_session(SparkSpec(master="local[2]"), "cold-start")
session = time.perf_counter() - started
spark.read.format("delta").load({table!r}).groupBy("user").count().collect()
print(session, time.perf_counter() - started - session)
"""
QUERY = "SELECT user, sum(clicks) FROM clicks_per_minute GROUP BY user ORDER BY user"
MODES = {"archive": {}, "no archive": {jvm_archive.SWITCH_ENV: "off"}}
FIGURES = ("session", "first query", "run", "query", "nothing new, Spark", "nothing new")


def child_env(src: Path | None) -> dict[str, str]:
    """The environment of a timed command: no inherited storage root, and another
    checkout's ``src`` first on the path when given (for a before/after)."""
    env = {k: v for k, v in os.environ.items() if k != "STREAMSMITH_ROOT"}
    if src is not None:
        env["PYTHONPATH"] = str(src.resolve())
    return env


def cli_seconds(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "streamsmith", *args], cwd=cwd, env=env,
                   check=True, capture_output=True)  # fmt: skip
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per figure")
    parser.add_argument(
        "--nothing-new-only", action="store_true", help="only the run and the nothing-new figures"
    )
    args = parser.parse_args()
    figure_names = FIGURES if not args.nothing_new_only else ("run", *FIGURES[-2:])
    archive = jvm_archive.archive_path()
    if archive is None or not archive.is_file():
        sys.exit(f"no archive at {archive}: run `streamsmith jvm build` first")
    figures: dict[str, dict[str, list[float]]] = {mode: {} for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="cold-start-") as folder:
        project = Path(folder) / "project"
        init_project(project)
        base = {k: v for k, v in os.environ.items() if k != "STREAMSMITH_ROOT"}
        for _ in range(args.runs):
            for mode, extra in MODES.items():
                env = {**base, **extra}
                times = figures[mode]
                run = ["run", "--trigger", "available-now"]
                times.setdefault("run", []).append(
                    cli_seconds([*run, "--full-refresh"], project, env)
                )
                off = {**env, catchup.CHECK_ENV: "off"}
                times.setdefault("nothing new, Spark", []).append(cli_seconds(run, project, off))
                times.setdefault("nothing new", []).append(cli_seconds(run, project, env))
                if args.nothing_new_only:
                    continue
                times.setdefault("query", []).append(cli_seconds(["query", QUERY], project, env))
                table = project / "data/tables/clicks_per_minute"
                probe = subprocess.run(
                    [sys.executable, "-c", PROBE.format(table=str(table))],
                    env=env, check=True, capture_output=True, text=True,
                )  # fmt: skip
                session, first = map(float, probe.stdout.split()[-2:])
                times.setdefault("session", []).append(session)
                times.setdefault("first query", []).append(first)
    print(f"archive: {archive} ({archive.stat().st_size / 2**20:.0f} MiB)")
    print(f"median of {args.runs} fresh processes, seconds")
    print(f"{'':<20}" + "".join(f"{mode:>12}" for mode in MODES) + f"{'ratio':>8}")
    for figure in figure_names:
        medians = [statistics.median(figures[mode][figure]) for mode in MODES]
        print(f"{figure:<20}" + "".join(f"{m:>12.1f}" for m in medians)
              + f"{medians[0] / medians[1]:>8.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
