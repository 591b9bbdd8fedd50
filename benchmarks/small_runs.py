"""What a small catch-up costs a cold process, with Spark's defaults and with the settings
the test suite gives its JVMs.

Most of `make test`'s time is small work in fresh JVMs (a `streamsmith run` per CLI test,
a child per crash test) or in the shared session: a handful of rows, several queries.
This script runs the `streamsmith init` project's `run --trigger available-now
--full-refresh` (four queries over its 17-line sample) as a whole cold process, ``--runs``
rounds of A B A B over the JVM settings below, and prints wall time, CPU (the whole
process tree, the driver JVM included) and peak memory:

- ``defaults``: the product as a user runs it;
- ``client compiler``: ``-XX:TieredStopAtLevel=1`` (no server-compiler work, which pays
  off only in a longer life);
- ``small-data conf``: ``streamsmith.testing.SMALL_DATA_CONF`` (no code generation, idle
  queries polling every 200 ms instead of 10 ms);
- ``tests' settings``: both, as `tests/conftest.py` gives the commands the tests run.

    .venv/bin/python benchmarks/small_runs.py --runs 2
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from real_volume import Measured, measure, print_table

from streamsmith.scaffold import init_project
from streamsmith.testing import SMALL_DATA_CONF

SMALL_DATA = " ".join(f"-D{key}={value}" for key, value in SMALL_DATA_CONF.items())
SETTINGS = {
    "defaults": "",
    "client compiler": "-XX:TieredStopAtLevel=1",
    "small-data conf": SMALL_DATA,
    "tests' settings": f"-XX:TieredStopAtLevel=1 {SMALL_DATA}",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="rounds of every setting")
    args = parser.parse_args()
    base = {
        k: v for k, v in os.environ.items() if k not in ("STREAMSMITH_ROOT", "SPARK_SUBMIT_OPTS")
    }
    command = [sys.executable, "-m", "streamsmith", "run", "--trigger", "available-now",
               "--full-refresh"]  # fmt: skip
    measured: dict[str, list[Measured]] = {name: [] for name in SETTINGS}
    with tempfile.TemporaryDirectory(prefix="small-runs-") as folder:
        project = Path(folder) / "clicks"
        init_project(project)
        log = Path(folder) / "runs.log"
        os.chdir(project)  # the command finds its spec here
        for round_ in range(args.runs):
            for name, options in SETTINGS.items():
                env = {**base, "SPARK_SUBMIT_OPTS": options} if options else base
                result = measure(command, log, env)
                measured[name].append(result)
                figures = f"wall {result.wall:6.1f} s  cpu {result.cpu:6.1f} s"
                print(f"  round {round_ + 1} {name:<16} {figures}", flush=True)
    print_table(measured, "defaults")


if __name__ == "__main__":
    main()
