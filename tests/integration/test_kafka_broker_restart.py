"""A broker that goes away mid-stream and comes back: a clear failure, then nothing lost.

The broker keeps its topics in S3 storage (a standalone moto server on loopback), so the
same topics are there after it restarts; an in-memory broker would come back empty.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import boto3
import pytest
from crashing import batch_ids, spawn, wait_until
from pyspark.sql import SparkSession

from streamsmith.io.kafka.broker import EmbeddedBroker, start_broker
from streamsmith.processes import free_port, wait_for_port

# make test: a broker gone mid-stream fails the query clearly (test_kafka_source.py)
pytestmark = [pytest.mark.slow, pytest.mark.deep]

CHILD = Path(__file__).with_name("kafka_to_parquet_child.py")
BUCKET = "streamsmith-broker"


@pytest.fixture
def s3_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """An S3-compatible server on loopback with an empty bucket; the ``AWS_*`` settings
    Tansu reads to use it."""
    port = free_port()
    with (tmp_path / "moto.log").open("wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(port, 30)
        env = {
            "AWS_ACCESS_KEY_ID": "streamsmith",
            "AWS_SECRET_ACCESS_KEY": "streamsmith",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT": f"http://127.0.0.1:{port}",
            "AWS_ALLOW_HTTP": "true",
        }
        boto3.client(
            "s3",
            endpoint_url=env["AWS_ENDPOINT"],
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region_name=env["AWS_DEFAULT_REGION"],
        ).create_bucket(Bucket=BUCKET)
        yield env
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_broker_stopped_mid_stream_fails_clearly_and_restart_loses_nothing(
    spark: SparkSession,
    s3_env: dict[str, str],
    produce_on: Callable[..., None],
    tmp_path: Path,
) -> None:
    def broker_on(port: int | None) -> EmbeddedBroker:
        return start_broker(tmp_path / "broker", port, storage=f"s3://{BUCKET}/", env=s3_env)

    broker = broker_on(None)
    broker.create_topic("events", partitions=3)
    produce_on(broker.bootstrap, "events", [f"first-{i}".encode() for i in range(1800)])
    command = [sys.executable, str(CHILD), broker.bootstrap, "events", str(tmp_path / "out"),
               str(tmp_path / "cp")]  # fmt: skip
    child = spawn([*command, "interval=1s", "pollTimeoutMs=10000"])
    try:
        assert wait_until(child, lambda: len(batch_ids(tmp_path / "cp/commits")) >= 1, 300)
        broker.stop()
        _, stderr = child.communicate(timeout=240)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode != 0
    assert f"on {broker.bootstrap} for 10s" in stderr, stderr[-3000:]
    assert "is the broker up?" in stderr
    committed = len(batch_ids(tmp_path / "cp/commits"))
    assert committed < 6, "1800 records / 300 a batch: the broker left before the end"

    broker = broker_on(broker.port)  # same address, same storage
    try:
        produce_on(broker.bootstrap, "events", [f"second-{i}".encode() for i in range(300)])
        restarted = spawn([*command, "available-now"])
        _, stderr = restarted.communicate(timeout=600)
    finally:
        broker.stop()
    assert restarted.returncode == 0, stderr[-3000:]

    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    positions = [(r.partition, r.offset) for r in rows]
    assert len(positions) == len(set(positions)), "a record landed twice"
    assert set(positions) == {(p, o) for p in range(3) for o in range(700)}
    expected = [f"first-{i}" for i in range(1800)] + [f"second-{i}" for i in range(300)]
    assert sorted(r.value.decode() for r in rows) == sorted(expected)
