"""What the benchmark scripts share (run them as scripts: this folder is on their path)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from streamsmith.apps import get_app
from streamsmith.apps.ysb import kafka_overrides
from streamsmith.config import PipelineSpec, SparkSpec, Trigger, load_spec
from streamsmith.generate import produce_all
from streamsmith.generate.ysb import write_ysb, ysb_data
from streamsmith.io.kafka.broker import start_broker
from streamsmith.io.kafka.login import jvm_login
from streamsmith.io.kafka.options import SOURCE_NAME
from streamsmith.io.kafka.source import register_kafka_source
from streamsmith.io.lake import replace_static_table, table_path
from streamsmith.runtime.plan import Plan, build_plan
from streamsmith.schemas.ysb import CAMPAIGNS_SCHEMA
from streamsmith.spark.session import build_session

YSB_TOPIC = "ysb-ads"


def jvm_pid(spark: SparkSession) -> int:
    """The process id of ``spark``'s driver JVM (whose CPU :func:`process_cpu` reads)."""
    jvm = spark._jvm
    assert jvm is not None
    return int(jvm.java.lang.ProcessHandle.current().pid())


def process_cpu(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` and of its ended children (the short
    processes Hadoop starts on a local disk, without streamsmith's file system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # u s cu cs


def one_row_batches(
    query: StreamingQuery, folder: Path, batches: int, pid: int
) -> tuple[float, float]:
    """Wall and JVM CPU seconds (process ``pid``) of ``batches`` one-row micro-batches of
    ``query``, whose JSON file source reads ``folder``: a file each, processed in turn."""
    query.processAllAvailable()  # what was there before: the table's first batch, not timed
    cpu, started = process_cpu(pid), time.perf_counter()
    for n in range(1, batches + 1):
        (folder / f"{n}.json").write_text(json.dumps({"n": n}) + "\n")
        query.processAllAvailable()
    return time.perf_counter() - started, process_cpu(pid) - cpu


def timed(runs: int, action: Callable[[], None]) -> list[float]:
    """Wall seconds of ``runs`` calls of ``action``, in order (the first is the cold one)."""
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        timings.append(time.perf_counter() - started)
    return timings


def timed_rounds(runs: int, actions: Mapping[str, Callable[[], None]]) -> dict[str, list[float]]:
    """Wall seconds of each action, ``runs`` rounds of one call each, in order.

    Round-robin rather than one action's runs back to back: the JVM keeps compiling hot
    code for minutes, so paths measured later in a run would otherwise look faster.
    """
    timings: dict[str, list[float]] = {name: [] for name in actions}
    for _ in range(runs):
        for name, action in actions.items():
            started = time.perf_counter()
            action()
            timings[name].append(time.perf_counter() - started)
    return timings


@contextmanager
def ysb_input(root: Path, events: int, *, kafka: bool) -> Iterator[dict[str, Any]]:
    """YSB input under ``root``: ``events`` ad events as JSON-lines files and the campaigns
    table and, with ``kafka``, the same events in a 3-partition topic of an embedded
    broker (up while the context lasts). Yields the spec overrides that point the ysb
    app at them (none for the files, its default)."""
    data = ysb_data(events, rate=10_000, chunks=8, seed=1)
    write_ysb(data, root / "input" / "ysb")
    replace_static_table(table_path(root, "ysb_campaigns"), data.campaigns, CAMPAIGNS_SCHEMA)
    if not kafka:
        yield {}
        return
    with start_broker(root / "broker") as broker:
        broker.create_topic(YSB_TOPIC, partitions=3)
        produce_all(broker.bootstrap, YSB_TOPIC, data.lines, [None] * len(data.lines))
        yield kafka_overrides(broker.bootstrap, YSB_TOPIC)


def ysb_arguments(doc: str, runs: int, runs_help: str) -> argparse.Namespace:
    """``--events``, ``--runs`` and ``--kafka``, as the YSB profiling scripts take them."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=runs, help=runs_help)
    parser.add_argument("--kafka", action="store_true", help="read from an embedded broker")
    return parser.parse_args()


@contextmanager
def ysb_bench(
    name: str, events: int, *, kafka: bool
) -> Iterator[tuple[Path, SparkSession, PipelineSpec]]:
    """A temporary storage root holding the YSB input (:func:`ysb_input`), a ``local[*]``
    session, and the ysb app's spec over that input."""
    with (
        tempfile.TemporaryDirectory(prefix=f"streamsmith-bench-{name}-") as tmp,
        ysb_input(Path(tmp), events, kafka=kafka) as overrides,
    ):
        root = Path(tmp)
        spark = build_session(SparkSpec(master="local[*]"), f"bench-ysb-{name}")
        try:
            app = get_app("ysb")
            yield root, spark, load_spec(app.default_spec, overrides=overrides, storage_root=tmp)
        finally:
            spark.stop()


def ysb_catch_up(spec: PipelineSpec, **changes: Any) -> Plan:
    """An ``available-now`` plan of the ysb app, its first flow changed by ``changes``
    (``quarantine=False``, ``record_late=False``: the table query alone)."""
    base = get_app("ysb")
    flow = dataclasses.replace(base.flows[0], **changes)
    return build_plan(dataclasses.replace(base, flows=(flow, base.flows[1])), spec,
                      Trigger("available-now"))  # fmt: skip


def kafka_records(
    spark: SparkSession, bootstrap: str, topic: str, *, connector: str = "python"
) -> DataFrame:
    """Every record of ``topic`` from its start, as a stream (raw values) through
    streamsmith's Python connector or (``connector="jvm"``) Spark's own."""
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
               "startingOffsets": "earliest"}  # fmt: skip
    if connector == "python":
        register_kafka_source(spark)  # logs in to streamsmith's broker by itself
    else:
        options = jvm_login(options)  # the broker admits logged-in clients only
    return (
        spark.readStream.format(SOURCE_NAME if connector == "python" else "kafka")
        .options(**options)
        .load()
    )


def bare_windows(events: DataFrame, campaigns: DataFrame) -> DataFrame:
    """YSB's windowed count as a user writes it in plain Spark: ``window, campaign_id,
    count``."""
    return (
        events.withWatermark("event_time", "10 seconds")
        .where("event_type = 'view'")
        .select("ad_id", "event_time")
        .join(F.broadcast(campaigns), "ad_id")
        .groupBy(F.window("event_time", "10 seconds"), "campaign_id")
        .count()
    )


def table_query(frame: DataFrame, out: Path, fmt: str = "parquet") -> StreamingQuery:
    """``frame`` appended by Spark's sink of ``fmt`` (Parquet files, or Delta Lake's) to
    ``out/table`` (exactly-once by the sink's commit log, or Delta's transaction marks),
    one ``availableNow`` run."""
    return (
        frame.writeStream.format(fmt)
        .option("path", str(out / "table"))
        .option("checkpointLocation", str(out / "checkpoint"))
        .outputMode("append")
        .trigger(availableNow=True)
        .start()
    )


def bare_query(events: DataFrame, campaigns: DataFrame, out: Path) -> StreamingQuery:
    """YSB as a user writes it in plain Spark: no quarantine, no late-event record."""
    return table_query(bare_windows(events, campaigns), out)


# Spark's UI on a loopback port Spark picks, for :func:`print_stages` (a local master binds
# its UI to SPARK_LOCAL_IP, which streamsmith sets to 127.0.0.1).
STAGES_UI_CONF = {
    "spark.ui.enabled": "true",
    "spark.ui.port": "0",
    "spark.ui.retainedStages": "1000",
}


def print_stages(spark: SparkSession, after: float = 0.0) -> None:
    """Where a run's micro-batches spent their time, from Spark's own stage records: per
    kind of stage (its call site and task count), how many ran and their wall time from
    first task to completion. Needs a session built with ``STAGES_UI_CONF``; stages that
    started before ``after`` (epoch seconds: a warm-up) are left out."""
    url = spark.sparkContext.uiWebUrl
    if url is None:
        raise SystemExit("Spark's UI is off: build the session with STAGES_UI_CONF")
    base = f"{url}/api/v1/applications/{spark.sparkContext.applicationId}"
    with urllib.request.urlopen(f"{base}/stages?status=complete") as answer:
        stages = json.load(answer)
    kinds: dict[tuple[str, int], list[float]] = {}
    for stage in stages:
        if not stage.get("firstTaskLaunchedTime") or not stage.get("completionTime"):
            continue
        first = _ui_time(stage["firstTaskLaunchedTime"])
        if first >= after:
            wall = _ui_time(stage["completionTime"]) - first
            kinds.setdefault((stage["name"], stage["numTasks"]), []).append(wall * 1000)
    print(f"{'stage (call site)':<52}{'tasks':>6}{'stages':>8}{'median ms':>10}{'p90 ms':>8}")
    for (name, tasks), walls in sorted(kinds.items(), key=lambda kind: -len(kind[1])):
        walls.sort()
        print(f"{name[-52:]:<52}{tasks:>6}{len(walls):>8}{statistics.median(walls):>10,.0f}"
              f"{walls[int(0.9 * (len(walls) - 1))]:>8,.0f}")  # fmt: skip


def _ui_time(text: str) -> float:
    """Epoch seconds of a time in Spark's REST answers (``2026-11-24T15:21:03.123GMT``)."""
    moment = datetime.strptime(text.removesuffix("GMT"), "%Y-%m-%dT%H:%M:%S.%f")
    return moment.replace(tzinfo=UTC).timestamp()
