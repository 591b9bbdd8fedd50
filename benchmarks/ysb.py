"""The Yahoo Streaming Benchmark: streamsmith's ``ysb`` app beside bare Spark and the limits.

One generated data set (``--events`` ad events, about 250 bytes of JSON each; with
``--corrupt``, that fraction of extra broken lines) is written as JSON-lines files and
produced to a 3-partition topic of an embedded broker. Each path runs the whole YSB
query (views only, ad -> campaign join, 10-second windows with a 10-second watermark,
appended to a Delta table by the app and the fair baseline, to Parquet by bare Spark) as
one ``availableNow`` run, ``--runs`` rounds in one JVM, each round running every path
once (so JIT warm-up favours none); the first round is dropped and the median of the
rest is reported (warm: an always-on stream lives warm). Printed, in events/s:

- streamsmith's app from the files, and from Kafka with the JSON decoded at the source
  (each with its quarantine and late-events queries, as in production);
- bare Spark: ``readStream.json`` on the files, and ``from_json`` over the streamsmith
  Kafka source (no JVM Kafka connector here), with the same query written inline and
  no quarantine;
- the fair baseline (``_fair.py``): what a careful engineer writes in plain Spark for the
  app's outputs and guarantees: the same query over the accepted events plus the same
  malformed-record checks (``PERMISSIVE`` with ``columnNameOfCorruptRecord`` on the files,
  ``from_json`` over the streamsmith Kafka source), every reject written with its raw
  payload to a second table, both Delta tables as the app's are and exactly-once by
  Delta's streaming sink (two queries over the same input: a windowed count's state
  cannot live in ``foreachBatch``; to 2026-12-07 the fair baseline wrote Parquet, from
  when the app did);
- one query per flow (``_fair.py``): the app's source, parser and transform run as one
  ``foreachBatch`` query that reads and parses each micro-batch once and writes the
  quarantine, the late events and the closed windows from it, exactly-once by batch id
  (the design issue 24 asks to measure beside the app's side queries);
- the limits: pyarrow's multi-threaded JSON reader on the same files (clean input
  only: it stops at the first broken line), and a raw confluent-kafka batched consume
  of the same topic;
- with ``--cold``, ``streamsmith run ysb --trigger available-now`` in a fresh process
  (JVM start included): what a scheduled run pays each time;
- with ``--peers``, the same query in Quix Streams, Bytewax and Pathway from the same
  topic (``benchmarks/peers``, run in ``.venv-peers``: ``make peers``), each timed from
  its first to its last input event, and in PyFlink from the same files (``make
  peers-flink``; Flink's Kafka connector is not in its wheel), timed by Flink's own
  figure for the job; the Spark paths are then also printed on that
  clock (first data batch's start to the last one's end), which leaves out what the
  peers' figures leave out: query start and the final no-data batch.

The last round's window tables and reject tables of the app, the fair baseline and the
one query per flow are compared before anything is printed (same windows and counts, as
many rejects as broken lines); a run whose outputs differ stops. Last, per path with
several queries, each query's busy time (the sum of its batch durations), and the steps
of the one query's batches.

    .venv/bin/python benchmarks/ysb.py --events 1000000 --cold
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import bare_query, kafka_records, timed_rounds
from _fair import (
    OneQueryFlow,
    batch_times,
    checked_files,
    checked_kafka,
    start_fair_baseline,
)
from confluent_kafka import Consumer, TopicPartition
from pyarrow import json as pa_json
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamsmith.apps import get_app
from streamsmith.apps.ysb import kafka_overrides
from streamsmith.config import SparkSpec, Trigger, load_spec
from streamsmith.generate import produce_all
from streamsmith.generate.ysb import write_ysb, ysb_data
from streamsmith.io.kafka.broker import EmbeddedBroker, start_broker
from streamsmith.io.kafka.client import consumer_config
from streamsmith.io.lake import is_table, read_table, replace_static_table, table_path
from streamsmith.monitor.eventlog import read_events
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import full_refresh, run_pipeline
from streamsmith.schemas.ysb import AD_EVENT_SCHEMA, CAMPAIGNS_SCHEMA
from streamsmith.spark.session import build_session

TOPIC = "ysb-ads"
PARTITIONS = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=4, help="per path; the first is discarded")
    parser.add_argument("--cold", action="store_true", help="also time a fresh-process run")
    parser.add_argument("--corrupt", type=float, default=0.0, help="fraction of broken lines")
    parser.add_argument("--peers", action="store_true", help="also run the peer frameworks")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="streamsmith-bench-ysb-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        data = ysb_data(args.events, rate=10_000, chunks=8, seed=1, corrupt_fraction=args.corrupt)
        files = write_ysb(data, root / "input" / "ysb")
        replace_static_table(table_path(root, "ysb_campaigns"), data.campaigns, CAMPAIGNS_SCHEMA)
        lines = data.events + data.corrupt
        size = sum(path.stat().st_size for path in files)
        print(f"generated {lines:,} lines ({size / 1e6:.0f} MB) in "
              f"{time.perf_counter() - started:.1f} s")  # fmt: skip
        with start_broker(root / "broker") as broker:
            broker.create_topic(TOPIC, partitions=PARTITIONS)
            produce_all(broker.bootstrap, TOPIC, data.lines, [None] * len(data.lines))
            spark = build_session(SparkSpec(master="local[*]"), "bench-ysb")
            cases = paths(spark, root, broker)
            if data.corrupt:
                del cases["pyarrow JSON reader (limit)"]
            timings = timed_rounds(args.runs, cases)
            checked = check_outputs(spark, root, data.corrupt)
            cold = cold_run(root) if args.cold else None
            spark.stop()
            if args.peers:
                for name, seconds in run_peers(root, broker, data.campaigns, lines).items():
                    timings[name] = [seconds]

    print(checked)
    report(lines, timings, cold)


@dataclass(frozen=True)
class Peer:
    """A peer script (``benchmarks/peers``), the virtualenv it runs in and what it reads."""

    script: str
    venv: str = ".venv-peers"  # made by `make peers`
    reads: str = "kafka"  # or "files": the JSON-lines folder


FLINK = "PyFlink, files"
PEERS = {
    "Quix Streams, Kafka": Peer("quix_ysb.py"),
    "Bytewax, Kafka": Peer("bytewax_ysb.py"),
    "Pathway, Kafka": Peer("pathway_ysb.py"),
    FLINK: Peer("pyflink_ysb.py", venv=".venv-flink", reads="files"),
}


def run_peers(
    root: Path, broker: EmbeddedBroker, campaigns: list[tuple[str, str]], lines: int
) -> dict[str, float]:
    """Each peer script in its virtualenv; seconds per peer that read everything, on its
    own clock (PyFlink's: Flink's time for the job, its local cluster's start left out)."""
    lookup = root / "campaigns.json"
    lookup.write_text(json.dumps(campaigns), encoding="utf-8")
    here = Path(__file__).resolve().parent
    seconds = {}
    for name, peer in PEERS.items():
        python = here.parent / peer.venv / "bin" / "python"
        if not python.exists():
            print(f"{name}: {python} is missing (`make peers`, `make peers-flink`); left out")
            continue
        source = [broker.bootstrap, TOPIC] if peer.reads == "kafka" else [str(root / "input/ysb")]
        command = [str(python), str(here / "peers" / peer.script), *source, str(lookup),
                   str(lines)]  # fmt: skip
        done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            print(f"{name}: failed ({done.returncode}): {done.stderr.strip()[-500:]}")
            continue
        result = json.loads(done.stdout.strip().splitlines()[-1])
        read = result["events"]
        if read < 0.9 * lines:
            print(f"{name}: read {read} of {lines} events; left out")
            continue
        short = f"; read {read} of {lines} events, rate scaled to all" if read < lines else ""
        print(f"{name}: {result['windows']} windows closed{short}")
        seconds[name] = result.get("job_seconds", result["seconds"]) * lines / read
    return seconds


# Seconds from the first data batch's start to the last data batch's end, per run of a
# Spark path: the clock the peers are timed with (first input event to last), without
# the start of the queries and their Python planners.
PROCESSING: dict[str, list[float]] = {}


def paths(spark: SparkSession, root: Path, broker: EmbeddedBroker) -> dict[str, Callable[[], None]]:
    """Every measured path, each an action that runs it once from scratch."""
    app = get_app("ysb")
    kafka = kafka_overrides(broker.bootstrap, TOPIC)
    kafka_jvm = kafka_overrides(broker.bootstrap, TOPIC, json_at_source=False)
    campaigns = read_table(spark, table_path(root, "ysb_campaigns")).cache()
    campaigns.count()

    def app_run(name: str, overrides: dict[str, Any]) -> Callable[[], None]:
        spec = load_spec(app.default_spec, overrides=overrides, storage_root=str(root / name))
        replace_static_table(
            table_path(root / name, "ysb_campaigns"),
            [tuple(r) for r in campaigns.collect()],
            CAMPAIGNS_SCHEMA,
        )
        plan = build_plan(app, spec, Trigger("available-now"))

        def run() -> None:
            full_refresh(plan)
            started = datetime.now(UTC).isoformat(timespec="milliseconds")[:23]
            run_pipeline(spark, plan)
            progress = [
                record
                for record in read_events(root / name, "ysb")
                if record["event"] == "progress" and record["batch_time"][:23] >= started
            ]
            batches = [
                (record["batch_time"], record["batch_ms"])
                for record in progress
                if record["query"] == "ysb.campaign_windows" and record["input_rows"]
            ]
            PROCESSING.setdefault(name, []).append(_processing_seconds(batches))
            _note_queries(name, [(r["query"], r["batch_ms"]) for r in progress])

        return run

    def bare(name: str, events: Callable[[], DataFrame]) -> Callable[[], None]:
        def run() -> None:
            out = root / "bare" / name
            shutil.rmtree(out, ignore_errors=True)
            query = bare_query(events(), campaigns, out)
            query.awaitTermination()
            batches = [
                (p.timestamp, p.batchDuration) for p in query.recentProgress if p.numInputRows
            ]
            PROCESSING.setdefault(name, []).append(_processing_seconds(batches))

        return run

    def kafka_values(connector: str = "python") -> DataFrame:
        raw = kafka_records(spark, broker.bootstrap, TOPIC, connector=connector)
        parsed = F.from_json(F.col("value").cast("string"), AD_EVENT_SCHEMA).alias("event")
        return raw.select(parsed).select("event.*")

    def fair(name: str, checked: Callable[[], DataFrame]) -> Callable[[], None]:
        def run() -> None:
            out = root / "fair" / name
            shutil.rmtree(out, ignore_errors=True)
            queries = start_fair_baseline(checked(), campaigns, out)
            for query in queries.values():
                query.awaitTermination()
            _note_queries(f"fair-{name}", batch_times(queries))

        return run

    def one_query(name: str, overrides: dict[str, Any]) -> Callable[[], None]:
        spec = load_spec(app.default_spec, overrides=overrides, storage_root=str(root / name))
        flow = build_plan(app, spec, Trigger("available-now")).flows[0]
        prototype = OneQueryFlow(flow, campaigns, root / name)

        def run() -> None:
            query = prototype.start(spark)
            query.awaitTermination()
            steps = [(f"  {step}", ms) for step, ms in prototype.steps]
            prototype.steps.clear()
            _note_queries(name, batch_times({"one query": query}) + steps)

        return run

    files = str(root / "input" / "ysb")
    return {
        "streamsmith app, files": app_run("app-files", {"sources": {"ads": {"path": files}}}),
        "bare Spark readStream.json": bare(
            "files", lambda: spark.readStream.schema(AD_EVENT_SCHEMA).json(files)
        ),
        "pyarrow JSON reader (limit)": lambda: arrow_decode(Path(files)),
        FAIR_FILES: fair("files", lambda: checked_files(spark, files)),
        ONE_FILES: one_query("one-files", {"sources": {"ads": {"path": files}}}),
        "streamsmith app, Kafka": app_run("app-kafka", kafka),
        "bare Spark from_json, Kafka": bare("kafka", kafka_values),
        "raw consume (limit)": lambda: raw_consume(broker),
        FAIR_KAFKA: fair("kafka", lambda: checked_kafka(spark, broker.bootstrap, TOPIC)),
        ONE_KAFKA: one_query("one-kafka", kafka),
        # The same on Spark's own Kafka connector (the flow decodes the JSON values).
        APP_KAFKA_JVM: app_run("app-kafka-jvm", kafka_jvm),
        "bare Spark from_json, Kafka (Spark's connector)": bare(
            "kafka-jvm", lambda: kafka_values("jvm")
        ),
        FAIR_KAFKA_JVM: fair(
            "kafka-jvm", lambda: checked_kafka(spark, broker.bootstrap, TOPIC, connector="jvm")
        ),
    }


FAIR_FILES = "fair baseline, files"
FAIR_KAFKA = "fair baseline, Kafka"
APP_KAFKA_JVM = "streamsmith app, Kafka (Spark's connector)"
FAIR_KAFKA_JVM = "fair baseline, Kafka (Spark's connector)"
ONE_FILES = "one query per flow, files"
ONE_KAFKA = "one query per flow, Kafka"

# Per path, per query: each run's data batches and their summed milliseconds.
QUERIES: dict[str, dict[str, list[tuple[int, int]]]] = {}


def _note_queries(path: str, batches: list[tuple[str, int]]) -> None:
    """Record one run's (query, batch milliseconds) under ``path``."""
    totals: dict[str, tuple[int, int]] = {}
    for query, ms in batches:
        count, total = totals.get(query, (0, 0))
        totals[query] = (count + 1, total + ms)
    for query, summed in totals.items():
        QUERIES.setdefault(path, {}).setdefault(query, []).append(summed)


def _outputs(source: str) -> dict[str, tuple[str, str]]:
    """Where each path from ``source`` (files, kafka) writes its window table and its
    rejects, under the storage root."""
    app = f"app-{source}/tables/campaign_windows"
    return {
        "streamsmith app": (app, f"{app}_quarantine"),
        "fair baseline": (f"fair/{source}/table", f"fair/{source}/rejects/table"),
        "one query per flow": (f"one-{source}/table", f"one-{source}/quarantine"),
    }


OUTPUTS = {
    "files": _outputs("files"),
    "Kafka": _outputs("kafka"),
    "Kafka (Spark's connector)": {
        name: paths for name, paths in _outputs("kafka-jvm").items() if name != "one query per flow"
    },
}


def check_outputs(spark: SparkSession, root: Path, corrupt: int) -> str:
    """That the last round's fair baseline and one-query flow wrote what the app wrote
    (the same closed windows and counts, as many rejects, every broken line among them),
    so their times compare like with like; stops the run when not."""
    said = []
    for source, paths in OUTPUTS.items():
        found = {}
        for name, (table, quarantine) in paths.items():
            rows = read_table(spark, root / table)  # Delta, or the one-query flow's Parquet
            if "window" in rows.columns:  # the fair baseline's bare-Spark shape
                rows = rows.select("campaign_id", F.col("window.start").alias("window_start"),
                                   F.col("count").alias("views"))  # fmt: skip
            start = F.unix_micros("window_start")
            windows = sorted(map(tuple, rows.select("campaign_id", start, "views").collect()))
            found[name] = (windows, _rows(spark, root / quarantine))
        app_windows, app_rejects = found["streamsmith app"]
        for name, (windows, rejects) in found.items():
            if windows != app_windows or rejects != app_rejects or rejects != corrupt:
                raise SystemExit(
                    f"{name}, {source}: {len(windows)} windows ({sum(w[2] for w in windows)} "
                    f"views), {rejects} rejects; the app: {len(app_windows)} windows "
                    f"({sum(w[2] for w in app_windows)} views), {app_rejects} rejects; "
                    f"{corrupt} broken lines: not the same outputs"
                )
        said.append(f"{len(app_windows)} windows and {app_rejects} rejects from {source}")
    return f"outputs equal to the app's in every path: {', '.join(said)}"


def _rows(spark: SparkSession, table: Path) -> int:
    """Rows of a table; 0 when none was written (no rejects: bare Spark's file sink
    leaves no schema to read)."""
    return read_table(spark, table).count() if is_table(table) else 0


def _processing_seconds(batches: list[tuple[str, int]]) -> float:
    """First data batch's start to last data batch's end, from (start, milliseconds)."""
    starts = [datetime.fromisoformat(start.replace("Z", "+00:00")) for start, _ in batches]
    ends = [
        begin + timedelta(milliseconds=ms) for begin, (_, ms) in zip(starts, batches, strict=True)
    ]
    return (max(ends) - min(starts)).total_seconds()


def arrow_decode(folder: Path) -> None:
    """Every file decoded into an Arrow table (types inferred), all cores."""
    for path in sorted(folder.glob("*.json")):
        pa_json.read_json(path)


def raw_consume(broker: EmbeddedBroker) -> None:
    """Every record of the topic with batched consume, until the high watermarks."""
    consumer = Consumer(consumer_config({"bootstrap.servers": broker.bootstrap}))
    partitions = [TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)]
    ends = {p.partition: consumer.get_watermark_offsets(p, timeout=10)[1] for p in partitions}
    consumer.assign(partitions)
    seen = dict.fromkeys(ends, -1)
    while any(seen[p] < ends[p] - 1 for p in ends):
        for message in consumer.consume(10_000, timeout=1.0):
            if message.error() is None:
                seen[message.partition()] = message.offset()
    consumer.close()


def cold_run(root: Path) -> float:
    """``streamsmith run ysb --trigger available-now`` on the files, in a fresh process."""
    cold_root = root / "cold"
    shutil.copytree(root / "input", cold_root / "input")
    shutil.copytree(root / "tables" / "ysb_campaigns", cold_root / "tables" / "ysb_campaigns")
    command = [str(Path(sys.executable).with_name("streamsmith")), "run", "ysb",
               "--trigger", "available-now", "--root", str(cold_root)]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def report(lines: int, timings: dict[str, list[float]], cold: float | None) -> None:
    print(f"{'path (warm: median, first round dropped)':<50}{'seconds':>9}{'events/s':>12}")
    rates = {}
    for name, runs in timings.items():
        warm = statistics.median(runs[1:] if len(runs) > 1 else runs)
        rates[name] = lines / warm
        print(f"{name:<50}{warm:>9.2f}{rates[name]:>12,.0f}")
    app_runs = timings.get("streamsmith app, files", [])
    if cold is not None:
        print(f"{'streamsmith run, files, cold process':<42}{cold:>9.2f}{lines / cold:>12,.0f}")
    if len(app_runs) > 1:  # the first path of the first round: a JVM up, nothing compiled
        first = app_runs[0]
        label = "streamsmith app, files, JVM up, JIT cold"
        print(f"{label:<42}{first:>9.2f}{lines / first:>12,.0f}")
    print("ratios:")
    for label, top, bottom in (
        ("app / bare Spark, files (goal >= 0.90)", "streamsmith app, files",
         "bare Spark readStream.json"),
        ("app / pyarrow, files (goal >= 0.45)", "streamsmith app, files",
         "pyarrow JSON reader (limit)"),
        ("app / bare Spark, Kafka", "streamsmith app, Kafka", "bare Spark from_json, Kafka"),
        ("app / raw consume, Kafka (goal >= 0.70)", "streamsmith app, Kafka",
         "raw consume (limit)"),
        ("app / fair baseline, files (goal >= 0.90)", "streamsmith app, files", FAIR_FILES),
        ("app / fair baseline, Kafka (goal >= 0.90)", "streamsmith app, Kafka", FAIR_KAFKA),
        ("one query per flow / fair baseline, files", ONE_FILES, FAIR_FILES),
        ("one query per flow / fair baseline, Kafka", ONE_KAFKA, FAIR_KAFKA),
        ("one query per flow / app, files", ONE_FILES, "streamsmith app, files"),
        ("one query per flow / app, Kafka", ONE_KAFKA, "streamsmith app, Kafka"),
        ("app: Spark's connector / Python connector", APP_KAFKA_JVM, "streamsmith app, Kafka"),
        ("app / fair baseline, Spark's connector", APP_KAFKA_JVM, FAIR_KAFKA_JVM),
        ("bare from_json: Spark's / Python connector",
         "bare Spark from_json, Kafka (Spark's connector)", "bare Spark from_json, Kafka"),
    ):  # fmt: skip
        if top in rates and bottom in rates:
            print(f"  {label:<44}{rates[top] / rates[bottom]:.2f}")
    if len(app_runs) > 1:
        warm = statistics.median(app_runs[1:])
        if cold is not None:
            print(f"  {'cold process / warm, files (goal <= 2.5)':<44}{cold / warm:.2f}")
        print(f"  {'JVM up, JIT cold / warm, files':<44}{app_runs[0] / warm:.2f}")
    peers = {name: rates[name] for name, p in PEERS.items() if p.reads == "kafka" and name in rates}
    if peers:
        best = max(peers, key=peers.__getitem__)
        ratio = rates["streamsmith app, Kafka"] / peers[best]
        print(f"  {'app / best peer, Kafka (goal >= 2)':<44}{ratio:.2f} ({best})")
    if FLINK in rates:
        print(f"  {'app / PyFlink, files':<44}{rates['streamsmith app, files'] / rates[FLINK]:.2f}")
    print("on the peers' clock (first data batch's start to last one's end: no query start):")
    processing = {}
    for key, name in (
        ("app-files", "streamsmith app, files"),
        ("files", "bare Spark readStream.json"),
        ("app-kafka", "streamsmith app, Kafka"),
        ("kafka", "bare Spark from_json, Kafka"),
        ("app-kafka-jvm", APP_KAFKA_JVM),
        ("kafka-jvm", "bare Spark from_json, Kafka (Spark's connector)"),
    ):
        runs = PROCESSING.get(key)
        if runs:
            seconds = statistics.median(runs[1:] if len(runs) > 1 else runs)
            processing[name] = lines / seconds
            print(f"  {name:<40}{seconds:>9.2f}{processing[name]:>12,.0f}")
    if peers and "streamsmith app, Kafka" in processing:
        ratio = processing["streamsmith app, Kafka"] / peers[best]
        print(f"  {'app / best peer, Kafka, same clock':<44}{ratio:.2f} ({best})")
    if FLINK in rates and "streamsmith app, files" in processing:
        ratio = processing["streamsmith app, files"] / rates[FLINK]
        print(f"  {'app / PyFlink, files, same clock':<44}{ratio:.2f}")
    print_queries()


def print_queries() -> None:
    """Per path with several outputs, each query's batches and busy time: the sum of its
    batch durations (no-data and skipped batches too; warm median). A path's queries run
    at once on the same cores, so their sum exceeds the path's wall time."""
    print("per query (busy: sum of its batch durations; queries of a path run at once):")
    print(f"  {'path':<22}{'query':<34}{'batches':>8}{'busy s':>9}")
    for path, queries in QUERIES.items():
        for query, runs in queries.items():
            warm = runs[1:] if len(runs) > 1 else runs
            batches = statistics.median(count for count, _ in warm)
            busy = statistics.median(ms for _, ms in warm) / 1000
            print(f"  {path:<22}{query:<34}{batches:>8.0f}{busy:>9.2f}")


if __name__ == "__main__":
    main()
