"""The ysb app, unchanged, on a Spark standalone cluster: a master and two one-core
workers started with ``streamsmith cluster start``, the app run by the CLI with
``spark.master`` set to the cluster's URL, from JSON files and from a 4-partition topic.

The lake must equal the generator's ground truth and the same run on local[2]; the event
log must show executors on both workers running tasks (for Kafka: reading partitions);
and the Python that runs the app's Python workers, on the driver and on the executors,
has no streamsmith installed, so the runs only work because the driver ships its zip.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import sysconfig
import venv
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from pyspark.sql import SparkSession

from streamsmith.apps import get_app
from streamsmith.config import Trigger, load_spec
from streamsmith.generate.ysb import YsbData, write_ysb, ysb_data
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.lake import read_table, replace_static_table, table_path
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import run_pipeline
from streamsmith.schemas.ysb import CAMPAIGNS_SCHEMA
from streamsmith.spark.cluster import (
    StandaloneCluster,
    auth_properties,
    cluster_home,
    cluster_status,
)

pytestmark = pytest.mark.cluster

DELAY = timedelta(seconds=10)
WORKERS = 2
KAFKA_PARTITIONS = 4
Produce = Callable[..., None]
SHIPPED_ZIP = re.compile(r"Fetching spark://127\.0\.0\.1:\d+/files/(streamsmith-[0-9a-f]{16}\.zip)")


def streamsmith(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("STREAMSMITH_ROOT", "PYSPARK_PYTHON")}
    return subprocess.run(
        [sys.executable, "-m", "streamsmith", *args],
        cwd=cwd,
        env={**base, "COLUMNS": "200", **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """Two workers of one core each, started and stopped with the CLI."""
    root = tmp_path_factory.mktemp("cluster-root")
    home = cluster_home(root)
    try:
        started = streamsmith("cluster", "start", "--root", str(root), "--workers", str(WORKERS),
                              cwd=root, timeout=180)  # fmt: skip
        assert started.returncode == 0, started.stderr
        running = cluster_status(home)
        assert running is not None, f"no cluster recorded in {home}"
        assert started.stdout.splitlines()[0] == running.master_url
        assert re.fullmatch(r"spark://127\.0\.0\.1:\d+", running.master_url)
        yield running
    finally:
        stopped = streamsmith("cluster", "stop", "--root", str(root), cwd=root, timeout=60)
        assert stopped.returncode == 0, stopped.stderr
        assert cluster_status(home) is None


@pytest.fixture(scope="module")
def executor_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Python with this virtualenv's packages but not streamsmith (neither the editable
    install's .pth nor a regular install): the interpreter PySpark starts its workers with."""
    env_dir = tmp_path_factory.mktemp("executor-venv")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    site = Path(sysconfig.get_paths(vars={"base": str(env_dir)})["purelib"])
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if entry.suffix == ".pth" or entry.name.lower().startswith(("streamsmith", "__editable__")):
            continue
        (site / entry.name).symlink_to(entry)
    python = str(env_dir / "bin" / "python")
    has = subprocess.run([python, "-c", "import pyspark, pandas, pyarrow, confluent_kafka"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert has.returncode == 0, has.stderr
    lacks = subprocess.run([python, "-c", "import streamsmith"],
                           capture_output=True, text=True, check=False)  # fmt: skip
    assert "No module named 'streamsmith'" in lacks.stderr
    return python


def generated() -> YsbData:
    """A minute of events (six windows; four close), 1% of lines broken."""
    return ysb_data(30_000, rate=500, chunks=3, seed=4, corrupt_fraction=0.01)


def lake_views(spark: SparkSession, root: Path) -> Counter[tuple[str, datetime]]:
    rows = read_table(spark, table_path(root, "campaign_windows")).collect()
    assert all(r.window_end - r.window_start == DELAY for r in rows)
    return Counter({(r.campaign_id, r.window_start.replace(tzinfo=UTC)): r.views for r in rows})


def quarantined(spark: SparkSession, root: Path) -> int:
    return read_table(spark, table_path(root, "campaign_windows_quarantine")).count()


def kafka_sets(bootstrap: str, topic: str) -> list[str]:
    """The ``--set`` lines a user types to read ysb's ads from ``topic`` (what
    ``streamsmith.apps.ysb.kafka_overrides`` gives code)."""
    return [
        f"kafka.bootstrap_servers={bootstrap}",
        "sources.ads.format=kafka",
        "sources.ads.path=null",
        f"sources.ads.options.subscribe={topic}",
        "sources.ads.options.startingOffsets=earliest",
        "sources.ads.options.valueFormat=json",
    ]


def run_on_cluster(
    cluster: StandaloneCluster, root: Path, python: str, sets: list[str]
) -> subprocess.CompletedProcess[str]:
    """``streamsmith run ysb --trigger available-now`` with only the master (and an event
    log, and waiting for both executors before the first job) changed by configuration."""
    conf = {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": str(root / "eventlog"),
        "spark.eventLog.compress": "false",
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        # as the local[2] session the result is compared with (and faster on two cores)
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
    }
    (root / "eventlog").mkdir()
    overrides = [f"spark.master={cluster.master_url}", *sets]
    overrides += [f"spark.conf.{key}={value}" for key, value in conf.items()]
    args = ["run", "ysb", "--root", str(root), "--trigger", "available-now"]
    for override in overrides:
        args += ["--set", override]
    result = streamsmith(*args, cwd=root, env={"PYSPARK_PYTHON": python})
    assert result.returncode == 0, result.stderr[-5000:]
    return result


def run_locally(spark: SparkSession, root: Path, sets: list[str]) -> None:
    """The same app and spec on this process's local[2] session."""
    app = get_app("ysb")
    spec = load_spec(app.default_spec, sets=sets, storage_root=str(root))
    run_pipeline(spark, build_plan(app, spec, Trigger("available-now")))


def read_event_log(root: Path) -> list[dict[str, Any]]:
    """The one application's events (a rolling log: ``eventlog_v2_<app>/events_<n>_<app>``)."""
    files = [f for f in (root / "eventlog").rglob("events_*") if not f.name.endswith(".crc")]
    files.sort(key=lambda f: int(f.name.split("_")[1]))
    assert files, f"no event log under {root / 'eventlog'}"
    return [json.loads(line) for file in files for line in file.read_text().splitlines()]


def executor_workers(events: list[dict[str, Any]], cluster: StandaloneCluster) -> dict[str, str]:
    """Executor id -> the web UI of the worker that ran it (from the executors' log URLs)."""
    workers = {urlsplit(worker.web_ui).netloc: worker.web_ui for worker in cluster.workers}
    placed = {}
    for event in events:
        if event["Event"] == "SparkListenerExecutorAdded":
            log_url = event["Executor Info"]["Log Urls"]["stderr"]
            placed[event["Executor ID"]] = workers[urlsplit(log_url).netloc]
    return placed


def scan_stages(events: list[dict[str, Any]], scope: str | None) -> dict[int, int]:
    """Stage id -> number of tasks, of the stages reading an RDD in ``scope`` (all if None)."""
    return {
        event["Stage Info"]["Stage ID"]: event["Stage Info"]["Number of Tasks"]
        for event in events
        if event["Event"] == "SparkListenerStageCompleted"
        and any(
            scope is None or json.loads(rdd.get("Scope", "{}")).get("name") == scope
            for rdd in event["Stage Info"]["RDD Info"]
        )
    }


def scan_stage_sizes(events: list[dict[str, Any]], scope: str) -> set[int]:
    return set(scan_stages(events, scope).values())


def tasks_per_worker(
    events: list[dict[str, Any]], cluster: StandaloneCluster, scope: str | None = None
) -> Counter[str]:
    """Successful tasks per worker, of stages reading an RDD in ``scope`` (all if None)."""
    stages = scan_stages(events, scope)
    placed = executor_workers(events, cluster)
    return Counter(
        placed[event["Task Info"]["Executor ID"]]
        for event in events
        if event["Event"] == "SparkListenerTaskEnd"
        and event["Stage ID"] in stages
        and event["Task End Reason"]["Reason"] == "Success"
    )


def assert_package_shipped(cluster: StandaloneCluster, events: list[dict[str, Any]]) -> None:
    """Each executor fetched streamsmith's zip from the driver (its only way to import it)."""
    app_id = next(e["App ID"] for e in events if e["Event"] == "SparkListenerApplicationStart")
    logs = sorted(cluster.home.glob(f"work/worker-*/{app_id}/*/stderr"))
    assert len(logs) == WORKERS, logs
    for log in logs:
        fetched = SHIPPED_ZIP.findall(log.read_text(errors="replace"))
        assert len(set(fetched)) == 1, f"{log} fetched {fetched}"


def assert_same_results(spark: SparkSession, data: YsbData, on_cluster: Path, local: Path) -> None:
    """The cluster's lake holds the ground truth's closed windows, as the local run's does,
    and both quarantined every corrupt line."""
    closed = data.closed_views(DELAY)
    assert len({window for _, window in closed}) == 4
    assert lake_views(spark, on_cluster) == closed
    assert lake_views(spark, on_cluster) == lake_views(spark, local)
    assert quarantined(spark, on_cluster) == quarantined(spark, local) == data.corrupt > 0


@pytest.mark.cluster_only
def test_ysb_from_files_on_the_cluster_equals_ground_truth_and_local(
    cluster: StandaloneCluster, executor_python: str, spark: SparkSession, tmp_path: Path
) -> None:
    data = generated()
    on_cluster, local = tmp_path / "cluster", tmp_path / "local"
    for root in (on_cluster, local):
        write_ysb(data, root / "input/ysb")
        replace_static_table(table_path(root, "ysb_campaigns"), data.campaigns, CAMPAIGNS_SCHEMA)

    run_on_cluster(cluster, on_cluster, executor_python, [])
    run_locally(spark, local, [])

    assert_same_results(spark, data, on_cluster, local)
    events = read_event_log(on_cluster)
    assert sorted(executor_workers(events, cluster).values()) == sorted(
        w.web_ui for w in cluster.workers
    )  # one executor per worker
    busy = tasks_per_worker(events, cluster)
    assert set(busy) == {w.web_ui for w in cluster.workers}, busy
    assert_package_shipped(cluster, events)


@pytest.mark.cluster_only  # make test-cluster: 100 s, over make test's time budget
def test_ysb_from_a_four_partition_topic_on_the_cluster_equals_ground_truth_and_local(
    cluster: StandaloneCluster,
    executor_python: str,
    spark: SparkSession,
    broker: EmbeddedBroker,
    produce: Produce,
    tmp_path: Path,
) -> None:
    data = generated()
    topic = "cluster-ysb-ads"
    broker.create_topic(topic, partitions=KAFKA_PARTITIONS)
    # Round-robin: unkeyed records would follow the producer's sticky partitioner, which
    # can leave a partition empty and a batch with fewer read tasks.
    produce(topic, data.lines, partitions=KAFKA_PARTITIONS)
    sets = kafka_sets(broker.bootstrap, topic)
    on_cluster, local = tmp_path / "cluster", tmp_path / "local"
    for root in (on_cluster, local):
        replace_static_table(table_path(root, "ysb_campaigns"), data.campaigns, CAMPAIGNS_SCHEMA)

    run_on_cluster(cluster, on_cluster, executor_python, sets)
    run_locally(spark, local, sets)

    assert_same_results(spark, data, on_cluster, local)
    # A micro-batch reads the four partitions (7,500 records each, under the apps'
    # minRecordsPerPartition) packed into one task per executor core (streamsmith's
    # Python source on the executors); both workers' executors read some of them.
    events = read_event_log(on_cluster)
    assert WORKERS in scan_stage_sizes(events, "MicroBatchScan")
    reads = tasks_per_worker(events, cluster, scope="MicroBatchScan")
    assert set(reads) == {w.web_ui for w in cluster.workers}, reads
    assert_package_shipped(cluster, events)


UNAUTHENTICATED_DRIVER = """
import sys
from pyspark.sql import SparkSession
SparkSession.builder.master(sys.argv[1]).getOrCreate().range(3).count()
"""


def test_only_drivers_with_the_clusters_secret_get_in(
    cluster: StandaloneCluster, tmp_path: Path
) -> None:
    """Another local user's driver (plain PySpark, no secret) is turned away at the SASL
    handshake and never registers; the secret is on no command line and in a file only
    this user can read (streamsmith's own drivers get in: the cluster_only tests)."""
    secret_file = auth_properties(cluster.master_url)
    assert secret_file is not None
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(secret_file.parent.stat().st_mode) == 0o700
    secret = next(
        line.split("=", 1)[1]
        for line in secret_file.read_text().splitlines()
        if line.startswith("spark.authenticate.secret=")
    )
    assert len(secret) == 64
    for daemon in (cluster.master, *cluster.workers):
        assert secret.encode() not in Path(f"/proc/{daemon.pid}/cmdline").read_bytes()

    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_SUBMIT_ARGS"}
    driver = subprocess.Popen(
        [sys.executable, "-c", UNAUTHENTICATED_DRIVER, cluster.master_url],
        env={**env, "SPARK_LOCAL_IP": "127.0.0.1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        start_new_session=True,
    )
    refused, seen = False, []
    try:
        assert driver.stderr is not None
        for line in driver.stderr:  # ends when the driver exits; killed once refused
            seen.append(line)
            if "Expected SaslMessage" in line:
                refused = True
                break
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    assert refused, "".join(seen[-20:])
    assert cluster.state()["activeapps"] == []
