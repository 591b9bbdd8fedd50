"""Talking to the broker from the driver: topics, partitions and their offset bounds.

End offsets are the maximum of two answers: ListOffsets(latest), which is what Kafka
clients normally use, and the high watermark of a real fetch response. On Apache Kafka
both agree. The embedded test broker (Tansu 0.6) answers ListOffsets(latest) with a
value that can lag the true end, while its fetch responses carry the right watermark;
taking the maximum is correct on both, because no broker reports a watermark beyond
the records it has.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from streamsmith.io.kafka.login import librdkafka_login
from streamsmith.io.kafka.offsets import Offsets, TopicPartition

log = logging.getLogger(__name__)


class KafkaSourceError(RuntimeError):
    """A broker-side problem, phrased with the topic, partition and bootstrap servers."""


@dataclass(frozen=True)
class Subscription:
    """Which partitions a source reads: named topics, a topic regex, or fixed partitions."""

    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assignment: tuple[TopicPartition, ...] = ()

    def describe(self) -> str:
        if self.kind == "subscribe":
            return f"subscribe={','.join(self.topics)}"
        if self.kind == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        return "assign=" + ",".join(f"{t}-{p}" for t, p in self.assignment)


def consumer_config(kafka_conf: Mapping[str, str], **overrides: Any) -> dict[str, Any]:
    """librdkafka settings for a consumer that never joins a group or commits offsets
    (logged in to streamsmith's own broker: ``streamsmith.io.kafka.login``)."""
    conf: dict[str, Any] = {
        "group.id": f"streamsmith-{uuid.uuid4().hex[:12]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "enable.partition.eof": True,
        "socket.timeout.ms": 30000,
        # librdkafka waits this long before fetching again once its local queue holds
        # queued.min.messages (default 1000 ms): reading a range in batches of 10,000,
        # the consumer sat idle most of the time (benchmarks/kafka_source.py, raw
        # consume of 1M records: 5.64 s at the default, 2.42 s at 10 ms).
        "fetch.queue.backoff.ms": 10,
    }
    conf.update(kafka_conf)
    conf.update(overrides)
    return librdkafka_login(conf)


class BrokerMetadata:
    """A driver-side consumer used only for metadata and offset bounds, never for data."""

    def __init__(self, kafka_conf: Mapping[str, str], timeout_s: float = 30.0) -> None:
        self._conf = dict(kafka_conf)
        self._timeout = timeout_s
        # Tiny fetches answered at once: at a partition's end a broker otherwise holds the
        # fetch for fetch.wait.max.ms (500 ms by default) before saying so, and every
        # micro-batch's planning asks for the end offsets.
        overrides = {"max.partition.fetch.bytes": 1024, "fetch.wait.max.ms": 10}
        self._consumer = Consumer(consumer_config(kafka_conf, **overrides))

    def close(self) -> None:
        self._consumer.close()

    @property
    def servers(self) -> str:
        return str(self._conf.get("bootstrap.servers", "?"))

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        """The partitions a subscription covers now (new topics and partitions included)."""
        if subscription.kind == "assign":
            return sorted(subscription.assignment)
        try:
            metadata = self._consumer.list_topics(timeout=self._timeout)
        except KafkaException as exc:
            raise KafkaSourceError(
                f"cannot list topics on {self.servers}: {exc}; check kafka.bootstrap.servers"
            ) from None
        if subscription.kind == "subscribe":
            names: Iterable[str] = [t for t in subscription.topics if t in metadata.topics]
        else:
            matcher = re.compile(subscription.pattern)
            names = [t for t in metadata.topics if matcher.fullmatch(t)]
        found: list[TopicPartition] = []
        for name in names:
            topic = metadata.topics[name]
            if topic.error is not None:
                continue
            found.extend((name, partition) for partition in topic.partitions)
        return sorted(found)

    def earliest(self, partitions: Iterable[TopicPartition]) -> Offsets:
        """First offset still held by the broker, per partition."""
        return {tp: self._watermarks(tp)[0] for tp in partitions}

    def latest(self, partitions: Iterable[TopicPartition]) -> Offsets:
        """Offset after the last record, per partition (see the module docstring)."""
        partitions = list(partitions)
        listed = {tp: self._watermarks(tp)[1] for tp in partitions}
        fetched = self._fetched_high_watermarks(partitions, listed)
        return {tp: max(listed[tp], fetched.get(tp, listed[tp])) for tp in partitions}

    def confirmed_latest(self, partitions: Iterable[TopicPartition]) -> Offsets | None:
        """:meth:`latest`, but None unless a fetch response confirmed every partition's end
        (ListOffsets alone can fall short on some brokers: see the module docstring)."""
        partitions = list(partitions)
        listed = {tp: self._watermarks(tp)[1] for tp in partitions}
        fetched = self._fetched_high_watermarks(partitions, listed)
        if set(fetched) != set(partitions):
            return None
        return {tp: max(listed[tp], fetched[tp]) for tp in partitions}

    def _watermarks(self, tp: TopicPartition) -> tuple[int, int]:
        try:
            low, high = self._consumer.get_watermark_offsets(
                KafkaTopicPartition(tp[0], tp[1]), timeout=self._timeout
            )
        except KafkaException as exc:
            raise KafkaSourceError(
                f"cannot read offsets of {tp[0]}-{tp[1]} on {self.servers}: {exc}"
            ) from None
        return int(low), int(high)

    def _fetched_high_watermarks(
        self, partitions: list[TopicPartition], positions: Mapping[TopicPartition, int]
    ) -> Offsets:
        """High watermarks from fetch responses at ``positions`` (tiny fetches, data unused)."""
        if not partitions:
            return {}
        assignment = [KafkaTopicPartition(t, p, max(positions[(t, p)], 0)) for t, p in partitions]
        self._consumer.assign(assignment)
        pending = set(partitions)
        result: Offsets = {}
        deadline = time.monotonic() + self._timeout
        while pending and time.monotonic() < deadline:
            message = self._consumer.poll(0.2)
            error = message.error() if message is not None else None
            if error is not None and error.code() != KafkaError._PARTITION_EOF and error.fatal():
                raise KafkaSourceError(f"broker {self.servers} failed: {error.str()}")
            for tp in list(pending):
                _, high = self._consumer.get_watermark_offsets(
                    KafkaTopicPartition(tp[0], tp[1]), cached=True
                )
                if high != OFFSET_INVALID and high >= 0:
                    result[tp] = int(high)
                    pending.discard(tp)
        if pending:
            # Not fatal: ListOffsets still bounds these partitions, at worst a batch later.
            log.warning(
                "no fetch response within %.0fs for %s on %s; using ListOffsets for them",
                self._timeout,
                ", ".join(f"{t}-{p}" for t, p in sorted(pending)),
                self.servers,
            )
        self._consumer.unassign()
        return result


def ensure_topic(bootstrap: str, name: str, partitions: int, timeout_s: float = 30.0) -> bool:
    """Create ``name`` unless it exists; True when it was created."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient(librdkafka_login({"bootstrap.servers": bootstrap}))
    future = admin.create_topics([NewTopic(name, num_partitions=partitions)])[name]
    try:
        future.result(timeout=timeout_s)
    except KafkaException as exc:
        if exc.args and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        raise KafkaSourceError(f"cannot create topic {name!r} on {bootstrap}: {exc}") from None
    return True


def sample_values(
    kafka_conf: Mapping[str, str], subscription: Subscription, limit: int, timeout_s: float = 30.0
) -> list[tuple[str, bytes]]:
    """Up to ``limit`` record values from the start of the subscribed partitions, each
    with where it was read (``topic-partition@offset``): the sample ``schema: infer``
    decides a Kafka source's schema from. Reads what the broker holds now, never waits
    for more."""
    metadata = BrokerMetadata(kafka_conf, timeout_s)
    try:
        partitions = metadata.partitions(subscription)
        start, end = metadata.earliest(partitions), metadata.latest(partitions)
    finally:
        metadata.close()
    pending = {tp: end[tp] for tp in partitions if end[tp] > start[tp]}
    if not pending:
        return []
    consumer = Consumer(consumer_config(kafka_conf))
    values: list[tuple[str, bytes]] = []
    try:
        consumer.assign([KafkaTopicPartition(t, p, start[(t, p)]) for t, p in pending])
        deadline = time.monotonic() + timeout_s
        while pending and len(values) < limit and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            tp = (str(message.topic()), int(message.partition() or 0))
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    pending.pop(tp, None)
                    continue
                raise KafkaSourceError(f"reading a sample of {tp[0]}-{tp[1]}: {error.str()}")
            offset = int(message.offset() or 0)
            if offset + 1 >= pending.get(tp, 0):
                pending.pop(tp, None)
            values.append((f"{tp[0]}-{tp[1]}@{offset}", message.value() or b""))
    finally:
        consumer.close()
    return values
