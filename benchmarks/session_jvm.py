"""The tests' shared Spark session under two sets of JVM options, side by side.

Runs the same test modules with two pytest workers (as ``make test`` does) once per
option set and round, alternating, and prints each run's wall time and the machine's
busy CPU time over it (from ``/proc/stat``: run it on a quiet machine). The options
reach the shared session through ``STREAMSMITH_TEST_JVM_OPTIONS`` (``tests/conftest.py``);
the default compares the JVM's own settings with ``streamsmith.testing.TEST_JVM_OPTIONS``.

    .venv/bin/python benchmarks/session_jvm.py [--runs 1] [--modules a.py b.py]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from streamsmith.testing import TEST_JVM_OPTIONS

ROOT = Path(__file__).resolve().parent.parent
MODULES = [
    "tests/streaming/test_cdc.py",
    "tests/streaming/test_user_pipelines.py",
    "tests/streaming/test_sdp_projects.py",
]
OPTION_SETS = {"the JVM's defaults": "", "TEST_JVM_OPTIONS": TEST_JVM_OPTIONS}


def busy_seconds() -> float:
    """The machine's CPU time spent so far (user, nice, system, irq, softirq)."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split()[1:8]]
    user, nice, system, _idle, _iowait, irq, softirq = fields
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def run(modules: list[str], options: str) -> tuple[float, float]:
    """Wall and busy CPU seconds of one pytest run of ``modules``; fails on a failed test."""
    env = {**os.environ, "STREAMSMITH_TEST_JVM_OPTIONS": options}
    command = [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "worksteal", *modules]
    cpu, started = busy_seconds(), time.monotonic()
    result = subprocess.run(command, check=False, cwd=ROOT, env=env, capture_output=True, text=True)
    wall, cpu = time.monotonic() - started, busy_seconds() - cpu
    if result.returncode != 0:
        raise SystemExit(f"pytest failed with options {options!r}:\n{result.stdout[-3000:]}")
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--modules", nargs="+", default=MODULES)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {label: [] for label in OPTION_SETS}
    for _ in range(args.runs):
        for label, options in OPTION_SETS.items():
            results[label].append(run(args.modules, options))
    print(f"{len(args.modules)} modules, two workers, {args.runs} run(s) each, alternating")
    print(f"{'shared session JVM options':<28}{'wall s':>10}{'busy CPU s':>12}   runs")
    for label, runs in results.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        each = ", ".join(f"{w:.0f}" for w, _ in runs)
        print(f"{label:<28}{wall:>10.1f}{cpu:>12.1f}   {each}")
    base, new = (statistics.median(w for w, _ in r) for r in results.values())
    print(f"ratio TEST_JVM_OPTIONS / defaults, wall: {new / base:.2f}")


if __name__ == "__main__":
    main()
