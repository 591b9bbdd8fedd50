"""A Kafka -> Kafka filter-and-enrich flow in Spark's Real-time Mode: the right records
reach the output topic, and every rejected one the dead-letter topic, in one query."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer
from pyspark.sql import SparkSession

from streamsmith.errors import UserError
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import Plan, build_plan
from streamsmith.runtime.start import start_queries

Produce = Callable[..., None]

# Filter (the slow clicks) and enrich (a speed class); the key is the click's id, so a
# consumer of the output keeps one record per click (Kafka delivers at least once).
FLOW_SQL = """
SELECT id AS key,
       to_json(named_struct('id', id, 'user', user, 'ms', ms,
                            'speed', CASE WHEN ms < 100 THEN 'fast' ELSE 'ok' END)) AS value
FROM clicks
WHERE ms < 1000
"""


def real_time_spec(bootstrap: str, topic: str, root: Path) -> dict[str, Any]:
    return {
        "name": "fastclicks",
        "storage_root": str(root),
        "trigger": "real-time=5s",
        "kafka": {"bootstrap_servers": bootstrap},
        "sources": {
            "clicks": {
                "format": "kafka",
                "options": {"subscribe": topic, "startingOffsets": "earliest"},
                "schema": "id string, user string, ms int",
                "required": ["id"],
            }
        },
        "flows": {
            "fast": {
                "source": "clicks",
                "sql": FLOW_SQL,
                "expect": {"known_user": {"sql": "user IS NOT NULL", "action": "quarantine"}},
                "sink": {"format": "kafka", "topic": f"{topic}-out"},
            }
        },
    }


def real_time_plan(tmp_path: Path, document: dict[str, Any]) -> Plan:
    path = tmp_path / "streamsmith.yml"
    path.write_text(yaml.safe_dump(document))
    app, spec = load_pipeline(path)
    return build_plan(app, spec)


def read_until(bootstrap: str, topics: list[str], count: int, seconds: float) -> list[Any]:
    """The records of ``topics`` from the start, once ``count`` have come (or the time is up)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
         "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )  # fmt: skip
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


@pytest.fixture
def one_partition(broker: EmbeddedBroker, request: pytest.FixtureRequest) -> Iterator[str]:
    """A 1-partition input topic: the flow's two reads (records and dead letters) take
    one long-running task each, the 2 task slots of the test session."""
    name = f"rt-{request.node.name[:60]}".replace("_", "-")
    broker.create_topic(name, partitions=1)
    broker.create_topic(f"{name}-out", partitions=1)
    broker.create_topic(f"{name}-out.dead-letter", partitions=1)
    yield name


def test_real_time_flow_filters_enriches_and_routes_rejects_to_the_dead_letter_topic(
    spark: SparkSession,
    broker: EmbeddedBroker,
    one_partition: str,
    produce: Produce,
    tmp_path: Path,
) -> None:
    clicks = [{"id": f"c{i}", "user": f"u{i % 3}", "ms": i * 50} for i in range(40)]
    bad = [b"{not json", json.dumps({"id": "c-anon", "ms": 5}).encode(), b'{"user": "u1"}']
    produce(one_partition, [json.dumps(c).encode() for c in clicks] + bad, partitions=1)
    plan = real_time_plan(tmp_path, real_time_spec(broker.bootstrap, one_partition, tmp_path))

    [(output, query)] = start_queries(spark, plan)
    try:
        kept = [c for c in clicks if c["ms"] < 1000]
        topics = [f"{one_partition}-out", f"{one_partition}-out.dead-letter"]
        records = read_until(broker.bootstrap, topics, len(kept) + len(bad), 120)
        assert query.exception() is None
    finally:
        query.stop()

    assert output.trigger.real_time and output.output_mode == "update"
    out = {m.key().decode(): json.loads(m.value()) for m in records if m.topic() == topics[0]}
    assert out == {c["id"]: {**c, "speed": "fast" if c["ms"] < 100 else "ok"} for c in kept}
    dead = {
        json.loads(m.value())["raw"]: json.loads(m.value())
        for m in records
        if m.topic() == topics[1]
    }
    reasons = {raw: d["reason"] for raw, d in dead.items()}
    assert reasons == {
        "{not json": "missing or invalid field id",  # as the micro-batch parser says it
        '{"id": "c-anon", "ms": 5}': "expectation known_user failed",
        '{"user": "u1"}': "missing or invalid field id",
    }
    assert {d["flow"] for d in dead.values()} == {"fast"}
    assert {(d["source_file"], d["position"]) for d in dead.values()} == {
        (f"kafka://{one_partition}/0", str(offset)) for offset in (40, 41, 42)
    }
    assert {m.key().decode() for m in records if m.topic() == topics[1]} == {
        f"kafka://{one_partition}/0/{offset}" for offset in (40, 41, 42)
    }


def test_a_real_time_flow_needing_more_task_slots_than_spark_has_is_refused(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, tmp_path: Path
) -> None:
    # 3 partitions, read for the records and again for the dead letters: 6 slots of 2.
    plan = real_time_plan(tmp_path, real_time_spec(broker.bootstrap, topic, tmp_path))
    with pytest.raises(UserError, match=r"needs 6 task slots, and Spark has 2: give Spark more"):
        start_queries(spark, plan)
    assert not spark.streams.active
