"""Synthetic event producers (files or Kafka) with knobs for late, duplicate and corrupt data."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any


def check_corruption_and_time(corrupt_fraction: float, start: datetime, span: timedelta) -> None:
    """Validate the arguments every generator shares, naming the argument and the fix."""
    if not 0 <= corrupt_fraction <= 1:
        raise ValueError(
            f"corrupt_fraction must be between 0 and 1, got {corrupt_fraction!r}: "
            "use 0 for clean data or e.g. 0.05 for a little corruption"
        )
    if start.tzinfo is None or start.utcoffset() is None:
        raise ValueError(
            f"start must be timezone-aware, got naive {start.isoformat()}: "
            "pass e.g. datetime(2026, 11, 20, tzinfo=UTC)"
        )
    if span <= timedelta(0):
        raise ValueError(f"span must be positive, got {span!r}: pass e.g. timedelta(hours=6)")


def produce_all(
    bootstrap: str, topic: str, values: Sequence[bytes], keys: Sequence[bytes | None]
) -> int:
    """Produce every value with its key and wait for all acks; raise if any is missing.

    The producer is idempotent with ``acks=all``, so a retry never duplicates a record and
    the expected answers a generator computed stay exact.
    """
    from confluent_kafka import KafkaException, Producer

    from streamsmith.io.kafka.login import librdkafka_login

    conf = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"}
    producer = Producer(librdkafka_login(conf))
    failures: list[str] = []

    def on_delivery(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(str(error))

    for key, value in zip(keys, values, strict=True):
        while True:
            try:
                producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
            except KafkaException as exc:
                raise RuntimeError(f"cannot produce to {topic} on {bootstrap}: {exc}") from None
        producer.poll(0)
    remaining = producer.flush(30)
    if failures:
        raise RuntimeError(
            f"{len(failures)} record(s) not delivered to {topic} on {bootstrap}, "
            f"first: {failures[0]}"
        )
    if remaining:
        raise RuntimeError(
            f"{remaining} record(s) to {topic} still unacknowledged by {bootstrap} after 30s; "
            "is the broker up?"
        )
    return len(values)
