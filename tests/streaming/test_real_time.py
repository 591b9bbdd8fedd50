"""A Kafka -> Kafka filter-and-enrich flow in Spark's Real-time Mode: the right records
reach the output topic, and every rejected one the dead-letter topic (written by the
flow's quarantine query, in micro-batches beside the real-time one)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamsmith.config import load_spec
from streamsmith.errors import UserError
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.app import App, FlowDefinition
from streamsmith.runtime.plan import Plan, build_plan
from streamsmith.runtime.start import start_queries
from streamsmith.transforms.quarantine import REJECT_REASON
from waiting import read_until, wait_for

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


@pytest.fixture
def one_partition(broker: EmbeddedBroker, request: pytest.FixtureRequest) -> Iterator[str]:
    """A 1-partition input topic: the flow's long-running task and its dead-letter
    query's micro-batches take the 2 task slots of the test session."""
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

    started = start_queries(spark, plan)
    try:
        kept = [c for c in clicks if c["ms"] < 1000]
        topics = [f"{one_partition}-out", f"{one_partition}-out.dead-letter"]
        records = read_until(broker.bootstrap, topics, len(kept) + len(bad), 120)
        assert [query.exception() for _, query in started] == [None, None]
        # A clean record later: the dead-letter query's batch of it waits for the flow's
        # checkpoint, which rejected nothing there, and reads nothing.
        produce(
            one_partition, [json.dumps({"id": "c99", "user": "u1", "ms": 5}).encode()], partitions=1
        )
        letters_query = started[1][1]

        def clean_batches() -> list[int]:
            return [p.numInputRows for p in letters_query.recentProgress if ends_at(p, 44)]

        wait_for(clean_batches, "the dead-letter query's batch of the clean record", 60)
        assert clean_batches() == [0]
    finally:
        for _, query in started:
            query.stop()

    [(output, _), (letters, _)] = started
    assert output.trigger.real_time and output.output_mode == "update"
    assert (letters.role, str(letters.trigger)) == ("quarantine", "interval=5s")
    out = {m.key().decode(): json.loads(m.value()) for m in records if m.topic() == topics[0]}
    assert out == {c["id"]: {**c, "speed": "fast" if c["ms"] < 100 else "ok"} for c in kept}
    dead = {
        json.loads(m.value())["raw"]: json.loads(m.value())
        for m in records
        if m.topic() == topics[1]
    }
    reasons = {raw: d["reason"] for raw, d in dead.items()}
    assert reasons == {
        "{not json": "malformed JSON value",  # as the micro-batch parser says it
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


def ends_at(progress: Any, offset: int) -> bool:
    """Whether a batch's progress ends its one source at ``offset`` of partition 0."""
    end = json.loads(progress.sources[0].endOffset or "{}")
    return any(partitions.get("0") == offset for partitions in end.values())


def test_a_real_time_flow_needing_more_task_slots_than_spark_has_is_refused(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, tmp_path: Path
) -> None:
    # 3 partitions, and one slot for the dead-letter query's micro-batches: 4 slots of 2.
    plan = real_time_plan(tmp_path, real_time_spec(broker.bootstrap, topic, tmp_path))
    with pytest.raises(UserError, match=r"needs 4 task slots, and Spark has 2: give Spark more"):
        start_queries(spark, plan)
    assert not spark.streams.active


def fahrenheit(records: DataFrame) -> DataFrame:
    """A transform that tags its own rejects (readings without a device)."""
    reading = F.from_json(F.col("value").cast("string"), "device string, celsius double")
    parsed = records.select("_source_file", "_position", "_raw", reading.alias("r"))
    return parsed.select(
        F.col("r.device").alias("key"),
        F.to_json(F.struct("r.device", (F.col("r.celsius") * 1.8 + 32).alias("f"))).alias("value"),
        "_source_file", "_position", "_raw",
        F.when(F.col("r.device").isNull(), F.lit("missing device")).alias(REJECT_REASON),
    )  # fmt: skip


def test_rejects_a_transform_tags_itself_reach_the_dead_letter_topic(
    spark: SparkSession, broker: EmbeddedBroker, one_partition: str, produce: Produce,
    tmp_path: Path,
) -> None:  # fmt: skip
    produce(one_partition, [b'{"device": "d1", "celsius": 100}', b'{"celsius": 3}'], partitions=1)
    source = {
        "format": "kafka",
        "options": {"subscribe": one_partition, "startingOffsets": "earliest"},
    }
    sink = {"format": "kafka", "topic": f"{one_partition}-out"}
    spec = {
        "app": "temps",
        "trigger": "real-time",
        "kafka": {"bootstrap_servers": broker.bootstrap},
        "sources": {"sensors": source},
        "flows": {"temps": {"source": "sensors", "sink": sink}},
    }
    app = App("temps", "temperatures", (FlowDefinition("temps", fahrenheit),), spec)
    plan = build_plan(app, load_spec(spec, storage_root=str(tmp_path)))

    started = start_queries(spark, plan)
    try:
        topics = [f"{one_partition}-out", f"{one_partition}-out.dead-letter"]
        records = read_until(broker.bootstrap, topics, 2, 120)
    finally:
        for _, query in started:
            query.stop()
    assert sorted(
        (m.topic(), m.key().decode(), json.loads(m.value()).get("reason")) for m in records
    ) == [
        (topics[0], "d1", None),
        (topics[1], f"kafka://{one_partition}/0/1", "missing device"),
    ]
