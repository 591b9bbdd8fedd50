"""Exactly-once from Kafka into Parquet under SIGKILL, and a broker that goes away.

Every (partition, offset) of the topic must be in the Parquet table exactly once after a
kill in the middle of a batch and a restart on the same checkpoint.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import kafka_to_parquet_child
import pytest
from crashing import batch_ids, kill_mid_batch, spawn
from pyspark.sql import SparkSession

from streamsmith.io.kafka.broker import EmbeddedBroker

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("kafka_to_parquet_child.py")
Produce = Callable[..., None]


RECORDS = 1800  # three partitions, 300 records a batch: six batches, the kill in the first


def start_child(
    broker: EmbeddedBroker, topic: str, base: Path, trigger: str
) -> subprocess.Popen[str]:
    command = [sys.executable, str(CHILD), broker.bootstrap, topic, str(base / "out")]
    return spawn([*command, str(base / "cp"), trigger])


def test_sigkill_mid_batch_then_restart_reads_every_offset_once(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, produce: Produce, tmp_path: Path
) -> None:
    produce(topic, [f"record-{i}".encode() for i in range(RECORDS)])
    child = start_child(broker, topic, tmp_path, "interval=0s")
    kill_mid_batch(child, tmp_path / "cp")
    assert len(batch_ids(tmp_path / "cp/commits")) < RECORDS // 300  # 300 a batch: work left

    # The restart, in this process's session: the checkpoint, not the process, is the point.
    where = [broker.bootstrap, topic, str(tmp_path / "out"), str(tmp_path / "cp")]
    restarted = kafka_to_parquet_child.start(spark, *where, "available-now")
    restarted.awaitTermination(600)
    assert restarted.exception() is None and not restarted.isActive

    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    positions = [(r.partition, r.offset) for r in rows]
    assert len(positions) == len(set(positions)), "a record landed twice"
    assert set(positions) == {(p, o) for p in range(3) for o in range(RECORDS // 3)}
    assert sorted(r.value for r in rows) == sorted(f"record-{i}".encode() for i in range(RECORDS))
