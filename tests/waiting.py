"""Waiting in tests for an always-on run to get somewhere (it has no end to wait for)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer

from streamsmith.io.kafka.login import librdkafka_login


def wait_for(
    condition: Callable[[], bool], what: str, timeout_s: float = 120, every_s: float = 0.2
) -> None:
    """Ask ``condition`` every ``every_s`` until it holds; fail naming ``what`` if it does
    not within ``timeout_s``. Conditions that run a Spark job ask less often: each one
    takes the cores from the run it waits for."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout_s:.0f} s for {what}"
        time.sleep(every_s)


def read_until(bootstrap: str, topics: list[str], count: int, seconds: float) -> list[Any]:
    """The records of ``topics`` from the start, once ``count`` have come (or the time is up)."""
    consumer = Consumer(librdkafka_login(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
         "auto.offset.reset": "earliest", "enable.auto.commit": False}
    ))  # fmt: skip
    consumer.subscribe(topics)
    records: list[Any] = []
    deadline = time.monotonic() + seconds
    try:
        while len(records) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)  # blocks until a record comes, at most 1 s
            if message is not None and message.error() is None:
                records.append(message)
    finally:
        consumer.close()
    return records
