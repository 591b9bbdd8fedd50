"""What the everyday commands cost: ``--help``, ``apps``, ``dry-run --plan-only`` (plain
``dry-run`` starts Spark to analyse the flows), ``status`` and ``checkpoint show``, each a
fresh process as a user types it.

In a ``streamsmith init`` project after one ``run --trigger available-now`` (a
checkpoint with a state store, and an event log), each command runs ``--runs`` times,
interleaved so the machine's state favours none; the script prints the median and the
fastest wall time, process start included. ``--src DIR`` times another checkout's code
(its ``src`` folder first on ``PYTHONPATH``), e.g. the main branch for a before/after.

    .venv/bin/python benchmarks/everyday_commands.py --runs 5
    .venv/bin/python benchmarks/everyday_commands.py --runs 5 --src ../main/src
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from cold_start import child_env, cli_seconds  # this folder is on a script's path

import streamsmith
from streamsmith.scaffold import init_project

COMMANDS = ("--help", "apps", "dry-run --plan-only", "status", "checkpoint show")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per command")
    parser.add_argument("--src", type=Path, help="time this checkout's src folder instead")
    args = parser.parse_args()
    env = child_env(args.src)
    times: dict[str, list[float]] = {command: [] for command in COMMANDS}
    with tempfile.TemporaryDirectory(prefix="everyday-") as folder:
        project = Path(folder) / "clicks"
        init_project(project)
        cli_seconds(["run", "--trigger", "available-now"], project, env)
        for _ in range(args.runs):
            for command in COMMANDS:
                times[command].append(cli_seconds(command.split(), project, env))
    code = args.src or Path(streamsmith.__file__).parents[1]  # what the children import
    print(f"code: {code}; {args.runs} fresh processes per command, wall seconds")
    print(f"{'command':<21}{'median':>8}{'fastest':>9}")
    for command, figures in times.items():
        print(f"{command:<21}{statistics.median(figures):>8.2f}{min(figures):>9.2f}")


if __name__ == "__main__":
    main()
