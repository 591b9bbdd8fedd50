"""A scheduled catch-up inside the warm supervisor against a warm run of the same work.

One process and one Spark session over the ``streamsmith init`` project (four queries).
Each round delivers a file of ``--rows`` new clicks, then catches up either as a warm run
(``run_pipeline`` with ``--trigger available-now``: a monitor, a supervisor and the
queries made for it, as a second run in the same process) or as the next due run of the
project's schedule in one :class:`Scheduler` kept between its runs (the clock is moved to
the due time, so no waiting). Rounds alternate; the first of each kind is dropped (the
first batch's code generation), then medians are printed with their ratio.

    .venv/bin/python benchmarks/scheduled.py --rounds 5 --rows 20000
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from streamsmith.config import SparkSpec, Trigger
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import run_pipeline
from streamsmith.runtime.scheduler import ManualClock, Scheduler, due_after
from streamsmith.runtime.supervisor import plan_monitor
from streamsmith.scaffold import init_project
from streamsmith.spark.session import build_session

START = datetime(2026, 1, 1, 10, tzinfo=UTC)


def deliver(inbox: Path, number: int, rows: int) -> None:
    """``rows`` clicks over minute ``number`` (so each round closes the last one's windows)."""
    pick = random.Random(number)
    first = START + timedelta(minutes=number)
    lines = []
    for index in range(rows):
        ts = first + timedelta(seconds=60 * index / rows)
        user, ms = f"u{pick.randrange(50)}", pick.randrange(2000)
        lines.append(json.dumps({"user": user, "url": "/", "ts": ts.isoformat(), "ms": ms}))
    (inbox / f"clicks-{number:04d}.jsonl").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="catch-ups of each kind")
    parser.add_argument("--rows", type=int, default=20_000, help="new clicks per catch-up")
    args = parser.parse_args()
    spark = build_session(SparkSpec(master="local[2]"), "scheduled-benchmark")
    with tempfile.TemporaryDirectory(prefix="scheduled-") as folder:
        project = Path(folder)
        init_project(project)
        sets = ["trigger=available-now", "schedule=* * * * *"]
        app, spec = load_pipeline(project / "streamsmith.yml", sets=sets)
        inbox = project / "data/input/clicks"
        scheduled_plan = build_plan(app, spec)
        warm_plan = build_plan(app, spec, Trigger("available-now"))  # the schedule dropped
        clock = ManualClock(START)
        monitor = plan_monitor(scheduled_plan)
        scheduler = Scheduler(spark, scheduled_plan, monitor, clock)
        monitor.attach(spark, scheduler.health)
        scheduler.start()
        stop = threading.Event()
        times: dict[str, list[float]] = {"warm run": [], "scheduled run": []}
        try:
            for number in range(2 * args.rounds):
                deliver(inbox, number, args.rows)
                started = time.perf_counter()
                if number % 2 == 0:
                    run_pipeline(spark, warm_plan)
                    times["warm run"].append(time.perf_counter() - started)
                    continue
                clock.moment = due_after("* * * * *", clock.moment)
                scheduler.step()
                while scheduler.running:
                    scheduler.wait(stop)
                    scheduler.step()
                times["scheduled run"].append(time.perf_counter() - started)
        finally:
            scheduler.stop()
            monitor.detach(spark)
    spark.stop()
    print(f"{args.rows} new clicks per catch-up, init project (4 queries), local[2]")
    print(f"median of {args.rounds - 1} warm catch-ups each (first dropped), seconds")
    medians = {kind: statistics.median(values[1:]) for kind, values in times.items()}
    for kind, values in times.items():
        shown = " ".join(f"{value:.2f}" for value in values)
        print(f"{kind:<15}{medians[kind]:>8.2f}   ({shown})")
    print(f"scheduled / warm run: {medians['scheduled run'] / medians['warm run']:.2f}")


if __name__ == "__main__":
    main()
