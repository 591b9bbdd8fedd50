"""YSB at a fixed rate: how soon after a window ends its final count is visible in PostgreSQL.

The fixed-rate mode of the YSB harness (``ysb.py`` measures throughput). Ad events are
produced to an embedded broker in real time at ``--rate`` per second, each stamped with
its send time, and the ``ysb`` app runs always-on in this process as shipped: its lake
flow (with quarantine and late-events queries) and its PostgreSQL flow (update mode,
YSB's Redis sink), both decoding the JSON at the source. A poller reads the PostgreSQL
table every 50 ms. A window's latency is YSB's: the moment its count first equals the
views sent for it, minus the window's end. Windows ending in the first ``--warmup``
seconds are left out (the first Python-worker batches pay their start-up). Every
measured window must reach exactly its count; the script fails otherwise.

    .venv/bin/python benchmarks/ysb_latency.py --rate 10000 --seconds 180

With ``--stateless`` it prints instead the rows of a stateless Kafka -> Kafka
filter-and-enrich flow, in Real-time Mode and in micro-batches, at each ``--rate``
(``_stateless_latency.py`` says how they are measured):

    .venv/bin/python benchmarks/ysb_latency.py --stateless --rate 10000 --rate 50000

The last row, ``pyflink``, is the peer: the same flow in PyFlink with Flink's Kafka
connector (``make peers-flink``; left out, saying so, without it). ``--stateless-triggers``
picks rows, e.g. ``--stateless-triggers pyflink``; ``bare-real-time=5s`` adds the same
SQL as a plain PySpark query on Spark's Kafka connector, Spark's own floor.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from _common import STAGES_UI_CONF, print_stages
from _stateless_latency import stateless_rows
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from streamsmith.apps import get_app
from streamsmith.apps.ysb import kafka_overrides
from streamsmith.config import SparkSpec, load_spec, parse_trigger
from streamsmith.generate.ysb import WINDOW, YsbData, ysb_campaigns, ysb_data
from streamsmith.io.kafka.broker import start_broker
from streamsmith.io.kafka.login import librdkafka_login
from streamsmith.io.lake import replace_static_table, table_path
from streamsmith.io.postgres.server import running_postgres
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import run_pipeline
from streamsmith.schemas.ysb import CAMPAIGNS_SCHEMA
from streamsmith.spark.session import build_session

TOPIC = "ysb-live"
Key = tuple[str, datetime]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rate", type=int, action="append", help="events per second (10,000; repeatable)"
    )
    parser.add_argument(
        "--stateless", action="store_true",
        help="the stateless Kafka -> Kafka rows: real-time, micro-batch, PyFlink, at each --rate",
    )  # fmt: skip
    parser.add_argument(
        "--stateless-triggers", default="real-time=5s,real-time,interval=0s,pyflink",
        help="the triggers of the --stateless rows (`real-time`: the default checkpoint "
        "interval, 60 s); `pyflink` is the PyFlink peer's row",
    )  # fmt: skip
    parser.add_argument("--seconds", type=int, default=180, help="how long to produce")
    parser.add_argument("--warmup", type=int, default=40, help="seconds left out at the start")
    parser.add_argument("--trigger", default=None, help="e.g. interval=1s (the app's default)")
    parser.add_argument(
        "--postgres-only", action="store_true",
        help="run only the PostgreSQL flow (no lake table, quarantine or late-events queries)",
    )  # fmt: skip
    parser.add_argument("--set", action="append", default=[], help="a spec setting KEY=VALUE")
    parser.add_argument("--partitions", type=int, default=3, help="of the topic")
    parser.add_argument(
        "--stages", action="store_true",
        help="also print Spark's stage times after the warm-up (turns Spark's UI on)",
    )  # fmt: skip
    args = parser.parse_args()
    rates = args.rate or [10_000]
    if args.stateless:
        stateless_rows(rates, args.stateless_triggers.split(","), args.seconds, args.warmup)
        return
    args.rate = rates[0]

    with tempfile.TemporaryDirectory(prefix="streamsmith-bench-latency-") as tmp:
        root = Path(tmp)
        root.chmod(0o711)  # PostgreSQL runs as its own user when this runs as root
        campaigns = ysb_campaigns()
        replace_static_table(table_path(root, "ysb_campaigns"), campaigns, CAMPAIGNS_SCHEMA)
        with start_broker(root / "broker") as broker, running_postgres(root / "pg") as pg:
            broker.create_topic(TOPIC, partitions=args.partitions)
            app = get_app("ysb")
            flows: dict[str, Any] = {"campaign_windows_pg": {"enabled": True}}
            if args.postgres_only:
                flows["campaign_windows"] = {"enabled": False}
            spec = load_spec(
                app.default_spec,
                sets=args.set,
                overrides={
                    **kafka_overrides(broker.bootstrap, TOPIC),
                    "flows": flows,
                    "postgres": {"dsn": pg.dsn},
                },
                storage_root=str(root),
            )
            trigger = parse_trigger(args.trigger) if args.trigger else None
            plan = build_plan(app, spec, trigger)
            conf = STAGES_UI_CONF if args.stages else {}
            spark = build_session(SparkSpec(master="local[*]", conf=conf), "bench-ysb-latency")
            stop = threading.Event()
            pipeline = threading.Thread(target=run_pipeline, args=(spark, plan, stop))
            pipeline.start()
            try:
                time.sleep(5)  # let the queries start before the first event is due
                start = _next_window(datetime.now(UTC) + timedelta(seconds=2))
                data = ysb_data(
                    args.rate * args.seconds, rate=args.rate, chunks=1, start=start,
                    campaigns=campaigns,
                )  # fmt: skip
                print(f"producing {data.events:,} events at {args.rate:,}/s from {start:%H:%M:%S}")
                measured = _measure(
                    data, broker.bootstrap, pg.dsn, args.rate, pipeline, args.warmup
                )
                _print_batches(spark)
                if args.stages:
                    print_stages(spark, after=(start + timedelta(seconds=args.warmup)).timestamp())
            finally:
                stop.set()
                pipeline.join()
                spark.stop()
    _report(measured, start + timedelta(seconds=args.warmup), data)


def _next_window(moment: datetime) -> datetime:
    step = WINDOW.total_seconds()
    return datetime.fromtimestamp(math.ceil(moment.timestamp() / step) * step, UTC)


def _measure(
    data: YsbData, bootstrap: str, dsn: str, rate: int, pipeline: threading.Thread, warmup: int
) -> dict[Key, float]:
    """Produce in real time while polling; seconds from window end to final count."""
    done = threading.Event()
    lag: list[tuple[float, float]] = []
    producer = threading.Thread(target=_produce, args=(data, bootstrap, rate, done, lag))
    producer.start()
    seen: dict[Key, float] = {}
    deadline = None
    with psycopg.connect(dsn, autocommit=True) as conn:
        while len(seen) < len(data.views):
            if not pipeline.is_alive() or not (producer.is_alive() or done.is_set()):
                raise SystemExit("the pipeline or the producer stopped early: see above")
            if done.is_set() and deadline is None:
                deadline = time.monotonic() + 60  # the last windows close within a minute
            if deadline is not None and time.monotonic() > deadline:
                break
            _poll(conn, data.views, seen)
            time.sleep(0.05)
    producer.join()
    missing = len(data.views) - len(seen)
    late = [behind for second, behind in lag if second >= warmup]
    print(f"producer behind its schedule after the warm-up: max {max(late, default=0):.2f} s")
    if missing:
        windows = sorted({w for k, w in data.views if (k, w) not in seen})
        raise SystemExit(
            f"{missing} campaign windows never reached their count in PostgreSQL; "
            f"windows starting {', '.join(f'{w:%H:%M:%S}' for w in windows)}"
        )
    return seen


def _poll(conn: psycopg.Connection, views: Counter[Key], seen: dict[Key, float]) -> None:
    now = time.time()
    rows = conn.execute("SELECT campaign_id, window_start, views FROM campaign_windows")
    for campaign, window_start, count in rows:
        key = (campaign, window_start.astimezone(UTC))
        if key in seen:
            continue
        if count > views[key]:
            raise SystemExit(f"window {key} counted {count} views, {views[key]} were sent")
        if count == views[key]:
            seen[key] = now - (key[1] + WINDOW).timestamp()


def _produce(
    data: YsbData, bootstrap: str, rate: int, done: threading.Event, lag: list[tuple[float, float]]
) -> None:
    """Send each event when its event time comes (in 5 ms steps)."""
    producer = Producer(librdkafka_login({"bootstrap.servers": bootstrap, "linger.ms": 5}))
    lines = data.lines
    first = data.first_time.timestamp()
    sent = 0
    while sent < len(lines):
        due = min(len(lines), int((time.time() - first) * rate) + 1)
        if due > sent:  # (event second, how late the send is against the schedule)
            lag.append((sent / rate, max(0.0, time.time() - first - sent / rate)))
        while sent < due:
            try:
                producer.produce(TOPIC, value=lines[sent])
                sent += 1
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        time.sleep(0.005)
    if producer.flush(30):
        raise SystemExit("events still unacknowledged 30 s after the last was sent")
    done.set()


def _print_batches(spark: SparkSession) -> None:
    """Each query's recent batches: how many read anything, the rows they read, how long
    they took and where (Spark's progress). Side queries (quarantine, late events) skip
    the batches their flow found clean or on time, reading nothing."""
    print(f"{'query (recent batches)':<34}{'batches':>8}{'read':>6}{'rows/read':>10}"
          f"{'median ms':>10}{'max ms':>8}  median ms by phase")  # fmt: skip
    for query in spark.streams.active:
        progress = [p for p in query.recentProgress if p.batchDuration]
        if not progress:
            continue
        reading = [p.numInputRows for p in progress if p.numInputRows]
        rows = statistics.median(reading) if reading else 0
        took = sorted(p.batchDuration for p in progress)
        phases = {
            phase: statistics.median(p.durationMs.get(phase, 0) for p in progress)
            for phase in ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")
        }
        print(
            f"{query.name:<34}{len(progress):>8}{len(reading):>6}{rows:>10,.0f}"
            f"{statistics.median(took):>10,.0f}{took[-1]:>8,}  "
            + ", ".join(f"{k} {v:,.0f}" for k, v in phases.items())
        )


def _report(seen: dict[Key, float], after: datetime, data: YsbData) -> None:
    kept = sorted(s for (_, window), s in seen.items() if window + WINDOW > after)
    if not kept:
        raise SystemExit("no window ended after the warm-up: run longer")

    def pct(p: float) -> float:
        return kept[min(len(kept) - 1, int(p * len(kept)))]

    windows = {window for _, window in seen if window + WINDOW > after}
    print(
        f"{len(kept)} campaign windows in {len(windows)} 10-second windows after the "
        f"warm-up, all with exactly the views sent ({data.events:,} events)"
    )
    print("latency from window end to final count visible in PostgreSQL:")
    print(f"  p50 {statistics.median(kept):.2f} s   p99 {pct(0.99):.2f} s   max {kept[-1]:.2f} s")


if __name__ == "__main__":
    main()
