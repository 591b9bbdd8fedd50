"""Shared fixtures: one local[2] SparkSession, one Apache Kafka broker and one PostgreSQL
server per test run."""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from confluent_kafka import Producer
from moto.server import ThreadedMotoServer
from pyspark import SparkContext
from pyspark.sql import SparkSession

from streamsmith.config import SparkSpec
from streamsmith.io.kafka.broker import EmbeddedBroker, start_broker
from streamsmith.io.kafka.login import librdkafka_login
from streamsmith.io.postgres.server import (
    PostgresServer,
    create_database,
    start_postgres,
    stop_postgres,
)
from streamsmith.processes import free_port
from streamsmith.spark.session import build_session
from streamsmith.testing import SMALL_DATA_CONF, TEST_JVM_OPTIONS

TEST_SPARK = SparkSpec(
    master="local[2]",
    # One driver JVM serves the whole run: with Delta tables everywhere (each table's log
    # cached by Delta) the default 1 GiB heap is short, and a driver out of memory stops
    # its SparkContext for every test after it.
    conf={
        "spark.sql.shuffle.partitions": 2,
        "spark.default.parallelism": 2,
        "spark.driver.memory": "4g",
        # benchmarks/session_jvm.py compares other options through this variable.
        "spark.driver.extraJavaOptions": os.environ.get(
            "STREAMSMITH_TEST_JVM_OPTIONS", TEST_JVM_OPTIONS
        ),
        **SMALL_DATA_CONF,
    },
    log_level="ERROR",
)


# Markers of tests left out of `make test` (its time budget), with the marker expression
# word that selects them and the target that runs them.
LEFT_OUT = {
    "deep": ("deep", "a deeper variant left to `make test-deep`"),
    "cluster_only": ("cluster", "cluster test left to `make test-cluster`"),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``deep`` or ``cluster_only`` run only when the marker expression asks
    for them (``make test-deep``, ``make test-cluster``): heavier variants of behaviour
    ``make test`` covers within its time budget."""
    expression = config.getoption("markexpr") or ""
    for marker, (word, reason) in LEFT_OUT.items():
        if word in expression:
            continue
        for item in items:
            if item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.skip(reason=reason))


# The driver JVMs of the commands the tests run in subprocesses (`streamsmith run`, the
# crash tests' children) live seconds to a minute: compiled by the client compiler only,
# they skip the server compiler's work, most of which would only pay off in a longer
# life. Spark's launcher adds SPARK_SUBMIT_OPTS to the driver JVM's options.
# The small-data settings reach them as system properties, which Spark reads as its conf.
SUBPROCESS_JVM_OPTIONS = " ".join(
    [
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseParallelGC",
        *(f"-D{key}={value}" for key, value in SMALL_DATA_CONF.items()),
    ]
)
os.environ.setdefault("SPARK_SUBMIT_OPTS", SUBPROCESS_JVM_OPTIONS)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The run's (a pytest worker's) one SparkSession. Its JVM serves every in-process
    test for the whole run, so it keeps the server compiler."""
    options = os.environ.pop("SPARK_SUBMIT_OPTS", None)
    try:
        session = build_session(TEST_SPARK, "streamsmith-tests")
    finally:
        if options is not None:
            os.environ["SPARK_SUBMIT_OPTS"] = options
    # A session made before this one (a command run in-process, say) would be returned by
    # getOrCreate instead: with the subprocesses' JVM options (client compiler only) and
    # Spark's default heap, which once ran short mid-way through a run.
    memory = session.conf.get("spark.driver.memory")
    if memory != TEST_SPARK.conf["spark.driver.memory"]:
        raise RuntimeError(f"the shared session was made elsewhere first (heap {memory})")
    yield session
    session.stop()


# The test folders whose tests use Spark in the worker's process, directly or through a
# command run in-process: their first test makes the shared session, so nothing else does.
_IN_PROCESS_SPARK = frozenset({"streaming", "integration"})


@pytest.fixture(autouse=True)
def _shared_session_first(request: pytest.FixtureRequest) -> None:
    if request.node.path.parent.name in _IN_PROCESS_SPARK:
        request.getfixturevalue("spark")


@pytest.fixture(scope="module", autouse=True)
def _forget_cached_tables() -> Iterator[None]:
    """After each test module, the shared session forgets the Delta logs and cached
    DataFrames its tests left: every test writes tables at new paths, and Delta keeps each
    table's log and state cached in the driver, so over a whole run the driver's heap
    would fill with the tables of tests long finished."""
    yield
    session = SparkSession.getActiveSession()
    if session is None or SparkContext._active_spark_context is None:
        return  # no test of the module used Spark, or one stopped it
    session.catalog.clearCache()
    jvm = session.sparkContext._jvm
    assert jvm is not None
    jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """One Apache Kafka broker (a KRaft node on loopback, data in a temp folder) for the
    whole run, without authentication (``auth=False``): tests talk to it with plain
    clients of their own. Brokers a test starts itself authenticate, as users' do."""
    with start_broker(tmp_path_factory.mktemp("broker"), auth=False) as running:
        yield running


@pytest.fixture
def topic(broker: EmbeddedBroker, request: pytest.FixtureRequest) -> str:
    """A fresh 3-partition topic named after the test."""
    name = "t-" + re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-")[:80]
    broker.create_topic(name, partitions=3)
    return name


Produce = Callable[..., None]


def produce_records(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    keys: list[bytes] | None = None,
    partitions: int = 3,
) -> None:
    """Write ``values`` round-robin over ``partitions`` and wait until all are acknowledged
    (logged in as streamsmith's clients do, when the broker is one of ours that asks)."""
    producer = Producer(
        librdkafka_login({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    )
    failures: list[str] = []

    def on_delivery(error: object, _message: object) -> None:
        if error is not None:
            failures.append(str(error))

    for index, value in enumerate(values):
        key = keys[index] if keys else None
        producer.produce(
            topic, value=value, key=key, partition=index % partitions, on_delivery=on_delivery
        )
    assert producer.flush(30) == 0, "records still unacknowledged after 30 s"
    assert not failures, failures


@pytest.fixture
def produce_on() -> Callable[..., None]:
    """``produce_on(bootstrap, topic, values, ...)``: :func:`produce_records` on any broker."""
    return produce_records


@pytest.fixture
def produce(broker: EmbeddedBroker) -> Produce:
    """``produce(topic, values, keys=None, partitions=3)`` on the session's broker."""
    return functools.partial(produce_records, broker.bootstrap)


@dataclass(frozen=True)
class S3Endpoint:
    """moto's S3 server on loopback, and a bucket of the test's own on it."""

    url: str
    bucket: str
    access_key: str = "streamsmith-test"
    secret_key: str = "streamsmith-test-secret"

    def hadoop_options(self) -> dict[str, str]:
        """S3A's settings for this endpoint, as a reader's options."""
        return {
            "fs.s3a.endpoint": self.url,
            "fs.s3a.access.key": self.access_key,
            "fs.s3a.secret.key": self.secret_key,
            "fs.s3a.path.style.access": "true",
        }

    def keys(self, prefix: str) -> list[str]:
        """Every object key under ``prefix`` in the bucket."""
        pages = (
            self.client()
            .get_paginator("list_objects_v2")
            .paginate(Bucket=self.bucket, Prefix=prefix)
        )
        return [entry["Key"] for page in pages for entry in page.get("Contents", [])]

    def client(self) -> Any:
        """boto3's S3 client of the endpoint."""
        return boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name="us-east-1",
        )


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """An S3 endpoint for the whole run: moto's standalone server on 127.0.0.1."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3(s3_server: str) -> S3Endpoint:
    """A fresh bucket on the run's S3 server (a bucket per test: Hadoop caches a
    filesystem per bucket, with the settings of its first use)."""
    endpoint = S3Endpoint(s3_server, f"lake-{uuid.uuid4().hex[:12]}")
    endpoint.client().create_bucket(Bucket=endpoint.bucket)
    return endpoint


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One embedded PostgreSQL server (loopback, throwaway) for the whole run.

    Its home is made with mkdtemp and opened to others: as root the server runs as the
    ``postgres`` user, who cannot enter pytest's private temp folders.
    """
    base = Path(tempfile.mkdtemp(prefix="streamsmith-pg-"))
    base.chmod(0o755)
    home = base / "postgres"
    try:
        yield start_postgres(home)
    finally:
        stop_postgres(home, "immediate")
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_dsn(postgres: PostgresServer, request: pytest.FixtureRequest) -> str:
    """A fresh database named after the test, on the shared server."""
    name = "t_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")[:55]
    start_postgres(postgres.home)  # a test may have stopped it
    return create_database(postgres, name)
