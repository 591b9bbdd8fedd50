"""A broker that goes away mid-stream and comes back: a clear failure, then nothing lost.

Apache Kafka keeps its topics on disk in the broker's home, so the same topics, records
and offsets are there after it restarts on that home.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from crashing import batch_ids, spawn, wait_until
from pyspark.sql import SparkSession

from streamsmith.io.kafka.broker import EmbeddedBroker, start_broker

# make test: a broker gone mid-stream fails the query clearly (test_kafka_source.py)
pytestmark = [pytest.mark.slow, pytest.mark.deep]

CHILD = Path(__file__).with_name("kafka_to_parquet_child.py")


def test_broker_stopped_mid_stream_fails_clearly_and_restart_loses_nothing(
    spark: SparkSession,
    produce_on: Callable[..., None],
    tmp_path: Path,
) -> None:
    def broker_on(port: int | None) -> EmbeddedBroker:
        return start_broker(tmp_path / "broker", port)

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

    broker = broker_on(broker.port)  # same address, same data on disk
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
