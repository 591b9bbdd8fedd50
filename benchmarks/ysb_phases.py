"""Where one YSB catch-up run spends its wall time, from Spark's progress reports.

The ``campaign_windows`` table query alone (no quarantine, no late events), run
``available-now`` over ``--events`` ad events from JSON-lines files or, with ``--kafka``,
from a 3-partition topic of an embedded broker (JSON decoded at the source). For each
run: wall time, the time from the call to the first batch's start (query start: for a
Python data source, Spark starts a Python process to plan the query), the data batch
(its ``addBatch`` and the rest: planning, offset and commit logs, state commit) and the
no-data batch that closes the windows. Prints every run and the median of all but the
first.

    .venv/bin/python benchmarks/ysb_phases.py --events 1000000 [--kafka]
"""

from __future__ import annotations

import json
import statistics
import time
from datetime import datetime
from pathlib import Path

from _common import ysb_arguments, ysb_bench, ysb_catch_up

from streamsmith.monitor.eventlog import read_events
from streamsmith.runtime.runner import full_refresh, run_pipeline

COLUMNS = ("wall", "start", "addBatch", "batch rest", "no-data batch")


def main() -> None:
    args = ysb_arguments(__doc__, 5, "the first is left out of the median")
    with ysb_bench("phases", args.events, kafka=args.kafka) as (root, spark, spec):
        plan = ysb_catch_up(spec, record_late=False, quarantine=False)
        print(f"{'seconds, ' + ('Kafka' if args.kafka else 'files'):<12}"
              + "".join(f"{c:>15}" for c in COLUMNS))  # fmt: skip
        rows = []
        for run in range(args.runs):
            full_refresh(plan)
            started = time.time()
            run_pipeline(spark, plan)
            row = phases(root, started, time.time() - started)
            rows.append(row)
            print(f"{'run ' + str(run + 1):<12}" + "".join(f"{v:>15.2f}" for v in row), flush=True)
        kept = rows[1:] or rows
        medians = [statistics.median(column) for column in zip(*kept, strict=True)]
        print(f"{'median':<12}" + "".join(f"{v:>15.2f}" for v in medians))


def phases(root: Path, started: float, wall: float) -> list[float]:
    """(wall, start, addBatch, rest of the data batch, no-data batch) of the run that
    began at ``started`` (epoch seconds), from the table query's progress events."""
    batches = []
    for record in read_events(root, "ysb"):
        if record["event"] != "progress" or record["query"] != "ysb.campaign_windows":
            continue
        progress = json.loads(record["progress"])
        at = datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
        if at >= started - 0.5:
            batches.append((at, progress))
    batches.sort(key=lambda pair: pair[0])
    data = [(at, p) for at, p in batches if p["numInputRows"]]
    idle = [p for _, p in batches if not p["numInputRows"]]
    first_at = data[0][0]
    add = sum(p["durationMs"]["addBatch"] for _, p in data) / 1000
    total = sum(p["durationMs"]["triggerExecution"] for _, p in data) / 1000
    closing = sum(p["durationMs"]["triggerExecution"] for p in idle) / 1000
    return [wall, first_at - started, add, total - add, closing]


if __name__ == "__main__":
    main()
