"""Soak: the ``ysb`` app always on at a fixed rate; memory and state must stay flat.

A writer thread drops one JSON-lines file per second with ``--rate`` ad events stamped
with the current time into the app's input folder, and deletes files older than five
minutes, which every query has read by then. (Spark's ``cleanSource=delete`` cannot be
used: the flow's three queries read the same folder, and the first to commit a file
deletes it under the others.) The app runs as it does in production (table,
quarantine and late-events queries, 1-second trigger). Every ``--every`` seconds the
script prints the resident memory of this Python process and of the JVM (split into
the heap Java has committed, how much of it is in use, and everything outside it:
RocksDB, metaspace, code, thread stacks), RocksDB's pinned block memory, the rows in
the windowed aggregation's state, how many views were written and how many the table
query has read (the backlog is the difference: Spark pushes the view filter into the
JSON scan, so its input count is views, not events), and the table's files; at the end, the
change from the first sample after warm-up to the last.

    .venv/bin/python benchmarks/soak.py --minutes 30 --rate 5000
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from streamsmith.apps import get_app
from streamsmith.config import Trigger, load_spec
from streamsmith.generate.ysb import ysb_campaigns, ysb_data
from streamsmith.io.lake import replace_static_table, table_path
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.start import start_queries, stop_gracefully
from streamsmith.schemas.ysb import CAMPAIGNS_SCHEMA
from streamsmith.spark.session import build_session

WARM_UP_S = 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--rate", type=int, default=5000, help="events per second")
    parser.add_argument("--every", type=float, default=30, help="seconds between samples")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="streamsmith-soak-") as tmp:
        root = Path(tmp)
        inbox = root / "input" / "ysb"
        inbox.mkdir(parents=True)
        campaigns = ysb_campaigns()
        replace_static_table(table_path(root, "ysb_campaigns"), campaigns, CAMPAIGNS_SCHEMA)
        app = get_app("ysb")
        spec = load_spec(app.default_spec, storage_root=str(root))
        spark = build_session(spec.spark, "streamsmith-soak")
        stop = threading.Event()
        written = [0]
        writer = threading.Thread(
            target=write_every_second,
            args=(inbox, args.rate, campaigns, stop, written),
            daemon=True,
        )
        writer.start()
        plan = build_plan(app, spec, Trigger("interval", 1.0))
        started = start_queries(spark, plan)
        queries = {output.query_name: query for output, query in started}
        try:
            samples = watch(spark, queries["ysb.campaign_windows"], root, args, written)
        finally:
            stop.set()
            stop_gracefully(started, 60)
    summarise(samples)


def write_every_second(
    inbox: Path,
    rate: int,
    campaigns: list[tuple[str, str]],
    stop: threading.Event,
    written: list[int],
) -> None:
    """One file per second of ``rate`` events stamped with the current second; files
    older than five minutes are deleted."""
    number = 0
    while not stop.is_set():
        started = time.monotonic()
        now = datetime.now(UTC).replace(microsecond=0)
        data = ysb_data(rate, rate=rate, chunks=1, seed=number, start=now, campaigns=campaigns)
        staging = inbox / f".{number:07d}.tmp"
        staging.write_bytes(b"\n".join(data.chunks[0]) + b"\n")
        staging.replace(inbox / f"ysb-{number:07d}.json")
        (inbox / f"ysb-{number - 300:07d}.json").unlink(missing_ok=True)
        number += 1
        written[0] += sum(data.views.values())
        stop.wait(max(0.0, 1.0 - (time.monotonic() - started)))


def rss_mb(pid: int) -> float:
    """Resident set size of a process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def watch(
    spark: SparkSession,
    query: StreamingQuery,
    root: Path,
    args: argparse.Namespace,
    written: list[int],
) -> list[tuple[float, float, float, int, float]]:
    """Print a sample every ``args.every`` seconds; return (s, python MB, JVM MB, rows)."""
    jvm_pid = spark.sparkContext._gateway.proc.pid  # type: ignore[union-attr]
    started = time.monotonic()
    end = started + args.minutes * 60
    samples = []
    read: dict[int, int] = {}  # batch id -> input rows of the table query
    runtime = spark.sparkContext._jvm.java.lang.Runtime.getRuntime()  # type: ignore[union-attr]
    print(f"{'seconds':>8} {'python MB':>10} {'JVM MB':>8} {'heap MB':>8} {'used':>6} "
          f"{'other':>6} {'RocksDB':>8} {'state rows':>11} {'views in':>9} {'read':>9} "
          f"{'files':>6}")  # fmt: skip
    while time.monotonic() < end:
        time.sleep(args.every)
        if query.exception() is not None:
            raise SystemExit(f"the query failed: {query.exception()}")
        progress = query.lastProgress or {}
        operators = progress.get("stateOperators", [])
        rows = sum(int(op.get("numRowsTotal") or 0) for op in operators)
        pinned = sum(
            int((op.get("customMetrics") or {}).get("rocksdbPinnedBlocksMemoryUsage") or 0)
            for op in operators
        )
        heap, free = runtime.totalMemory() / 2**20, runtime.freeMemory() / 2**20
        read.update({int(p["batchId"]): int(p["numInputRows"]) for p in query.recentProgress})
        windows = len(list((root / "tables" / "campaign_windows").glob("*.parquet")))
        elapsed = time.monotonic() - started
        sample = (elapsed, rss_mb(os.getpid()), rss_mb(jvm_pid), rows, heap)
        samples.append(sample)
        print(f"{elapsed:>8.0f} {sample[1]:>10.0f} {sample[2]:>8.0f} {heap:>8.0f} "
              f"{heap - free:>6.0f} {sample[2] - heap:>6.0f} {pinned / 2**20:>8.1f} {rows:>11} "
              f"{written[0]:>9} {sum(read.values()):>9} {windows:>6}", flush=True)  # fmt: skip
    return samples


def summarise(samples: list[tuple[float, float, float, int, float]]) -> None:
    settled = [s for s in samples if s[0] >= WARM_UP_S]
    if len(settled) < 2:
        print("run longer than the warm-up for a summary")
        return
    first, last = settled[0], settled[-1]
    rows = [s[3] for s in settled]
    print(f"after warm-up ({first[0]:.0f} s -> {last[0]:.0f} s): python {first[1]:.0f} -> "
          f"{last[1]:.0f} MB, JVM {first[2]:.0f} -> {last[2]:.0f} MB (heap {first[4]:.0f} -> "
          f"{last[4]:.0f} MB, outside the heap {first[2] - first[4]:.0f} -> "
          f"{last[2] - last[4]:.0f} MB), state rows {min(rows)}..{max(rows)}")  # fmt: skip


if __name__ == "__main__":
    main()
