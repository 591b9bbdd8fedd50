"""A real-time flow as a user runs it: ``dry-run`` refuses what Spark 4.2 cannot run in
Real-time Mode, and ``run`` killed by SIGKILL mid-batch and started again loses no
record (Kafka delivers at least once: a record the killed batch emitted comes again
with the same key, and the consumer keeps one per key)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer
from crashing import batch_ids, kill_while_emitting, spawn, wait_until
from pyspark.sql import SparkSession
from test_cli import streamsmith

from inprocess import in_project, invoke
from streamsmith.io.kafka.broker import EmbeddedBroker

Produce = Callable[..., None]

FLOW_SQL = (
    "SELECT id AS key, to_json(named_struct('id', id, 'ms', ms, 'slow', ms > 500)) AS value "
    "FROM clicks WHERE ms % 2 = 0"
)


def spec_file(tmp_path: Path, bootstrap: str, topic: str, **sink: Any) -> Path:
    document = {
        "name": "fastclicks",
        "storage_root": str(tmp_path / "root"),
        "trigger": "real-time=5s",
        "spark": {"master": "local[2]"},
        "kafka": {"bootstrap_servers": bootstrap},
        "sources": {
            "clicks": {
                "format": "kafka",
                "options": {"subscribe": topic, "startingOffsets": "earliest"},
                "schema": "id string, ms int",
                "required": ["id", "ms"],
            }
        },
        "flows": {
            "fast": {
                "source": "clicks",
                "sql": FLOW_SQL,
                "sink": {"format": "kafka", "topic": f"{topic}-out", **sink},
            }
        },
    }
    path = tmp_path / "streamsmith.yml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_dry_run_shows_the_real_time_plan_or_refuses_in_one_line(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In this process's session: the plan's text and the refusal are the point."""
    in_project(monkeypatch, tmp_path)
    path = spec_file(tmp_path, "127.0.0.1:9", "clicks")
    shown = invoke("dry-run", str(path))
    assert shown.returncode == 0, shown.stderr
    assert "trigger real-time=5s" in shown.stdout
    assert "dead-letter query fastclicks.fast.quarantine: kafka topic clicks-out.dead-letter" in (
        shown.stdout
    )

    postgres = "flows.fast.sink={format: postgres, table: fast, key: [key]}"
    refused = invoke("dry-run", str(path), "--set", postgres)
    assert refused.returncode != 0
    message = [line for line in refused.stderr.splitlines() if "real-time" in line]
    assert len(message) == 1, refused.stderr
    assert "its postgres sink (postgres fast) writes micro-batches" in message[0]


def keyed_records(bootstrap: str, topic: str, wanted: set[str], seconds: float) -> list[str]:
    """Every key read from ``topic`` (duplicates kept) once all ``wanted`` have come."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
         "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )  # fmt: skip
    consumer.subscribe([topic])
    keys: list[str] = []
    deadline = time.monotonic() + seconds
    try:
        while not wanted <= set(keys) and time.monotonic() < deadline:
            message = consumer.poll(1.0)  # blocks until a record comes, at most 1 s
            if message is not None and message.error() is None:
                keys.append(message.key().decode())
    finally:
        consumer.close()
    return keys


class Watch:
    """A consumer of ``topic`` noting which of ``keys`` have come."""

    def __init__(self, bootstrap: str, topic: str, keys: set[str]) -> None:
        self.keys, self.seen = keys, set[str]()
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": f"watch-{time.monotonic_ns()}",
             "auto.offset.reset": "earliest", "enable.auto.commit": False}
        )  # fmt: skip
        self.consumer.subscribe([topic])

    def seen_any(self) -> bool:
        message = self.consumer.poll(0.1)
        if message is not None and message.error() is None and message.key() is not None:
            key = message.key().decode()
            if key in self.keys:
                self.seen.add(key)
        return bool(self.seen)

    def close(self) -> None:
        self.consumer.close()


def committed_end(offsets: Path, topic: str) -> int:
    """The end offset of partition 0 of ``topic`` in a batch's offsets entry."""
    sources = offsets.read_text(encoding="utf-8").splitlines()[2:]
    return max(json.loads(line)[topic]["0"] for line in sources if topic in line)


@pytest.mark.slow
def test_sigkill_mid_batch_then_restart_loses_no_record(
    broker: EmbeddedBroker, produce: Produce, tmp_path: Path
) -> None:
    topic = "rt-crash"
    broker.create_topic(topic, partitions=1)
    path = spec_file(tmp_path, broker.bootstrap, topic)
    checkpoint = tmp_path / "root/checkpoints/fastclicks/fast"
    clicks = lambda start, stop: [  # noqa: E731
        json.dumps({"id": f"c{i}", "ms": i}).encode() for i in range(start, stop)
    ]
    produce(topic, [*clicks(0, 300), b"not json"], partitions=1)

    first = spawn([sys.executable, "-m", "streamsmith", "run", str(path)])
    # Records arrive while a later batch runs: it emits them at once, then dies uncommitted.
    assert wait_until(first, lambda: 1 in batch_ids(checkpoint / "offsets"), 300)
    produce(topic, clicks(300, 600), partitions=1)
    watch = Watch(broker.bootstrap, f"{topic}-out", {f"c{i}" for i in range(300, 600, 2)})
    try:
        killed_in = kill_while_emitting(first, checkpoint, watch.seen_any)
    finally:
        watch.close()
    # c{i} of the second lot is the input's record i + 1 (after c0-c299 and "not json"):
    # the batch that emitted it ends before it in no committed batch's offsets.
    emitted_at = min(int(key[1:]) + 1 for key in watch.seen)
    assert committed_end(checkpoint / "offsets" / str(killed_in - 1), topic) <= emitted_at

    again = spawn([sys.executable, "-m", "streamsmith", "run", str(path)])
    try:
        produce(topic, clicks(600, 800), partitions=1)
        wanted = {f"c{i}" for i in range(0, 800, 2)}
        keys = keyed_records(broker.bootstrap, f"{topic}-out", wanted, 300)
        dead = keyed_records(
            broker.bootstrap, f"{topic}-out.dead-letter", {f"kafka://{topic}/0/300"}, 60
        )
    finally:
        os.killpg(again.pid, signal.SIGINT)  # a graceful stop: a Ctrl-C in its terminal
        _, stderr = again.communicate(timeout=120)
    assert set(keys) == wanted, (
        f"missing {sorted(wanted - set(keys))[:10]}; stderr:\n{stderr[-3000:]}"
    )
    assert set(dead) == {f"kafka://{topic}/0/300"}
    # The stop ends the running epoch uncommitted (replayed on the next start): no error.
    assert [line for line in stderr.splitlines() if " ERROR " in line] == [], stderr[-3000:]
    # At least once: what the killed batch emitted may come again, never anything else.
    assert len(keys) >= len(wanted)
    # The real-time query's batches (one per checkpoint interval) are in the event log.
    shown = streamsmith("status", str(path), "--format", "json", cwd=tmp_path, timeout=120)
    assert shown.returncode == 0, shown.stderr
    rows = {row["query"]: row for row in map(json.loads, shown.stdout.splitlines())}
    assert rows["fastclicks.fast"]["batches"] >= 1, rows
