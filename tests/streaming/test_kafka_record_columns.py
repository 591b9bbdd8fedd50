"""A SQL flow reads a Kafka record's own columns (``kafka_columns``) beside its fields."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import yaml
from pyspark.sql import SparkSession

from streamsmith.config import Trigger
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.lake import register_lake_views
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import run_pipeline

Produce = Callable[..., None]


def test_a_sql_flow_reads_the_records_key_partition_and_timestamp(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, produce: Produce, tmp_path: Path
) -> None:
    values = [json.dumps({"device": f"d{i}", "celsius": i}).encode() for i in range(9)]
    bad = [b"{oops", b'{"device": "d9", "celsius": "warm"}', b"[1]", b""]
    produce(topic, [*values, *bad], keys=[f"k{i}".encode() for i in range(13)])
    spec = {
        "name": "sensors",
        "storage_root": str(tmp_path / "root"),
        "kafka": {"bootstrap_servers": broker.bootstrap},
        "sources": {
            "sensors": {
                "format": "kafka",
                "options": {"subscribe": topic, "startingOffsets": "earliest"},
                "schema": "device string, celsius int",
                "kafka_columns": ["key", "partition", "timestamp"],
            }
        },
        "flows": {
            "readings": {
                "source": "sensors",
                "sql": "SELECT device, celsius, CAST(key AS STRING) AS k, partition, "
                "timestamp AS written FROM sensors",
                "event_time": {"column": "timestamp", "lateness": "1 minute"},
                "sink": {"table": "readings"},
            }
        },
    }
    path = tmp_path / "streamsmith.yml"
    path.write_text(yaml.safe_dump(spec))
    app, loaded = load_pipeline(path)

    run_pipeline(spark, build_plan(app, loaded, Trigger("available-now")))

    register_lake_views(spark, tmp_path / "root")
    landed = {(r.k, r.device, r.partition, r.written) for r in spark.table("readings").collect()}
    # What Spark's own Kafka reader says of each record, read again as a batch.
    records = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .load()
        .selectExpr(
            "CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v", "partition", "timestamp"
        )
        .collect()
    )
    expected = {
        (r.k, json.loads(r.v)["device"], r.partition, r.timestamp)
        for r in records
        if r.v.encode() not in bad
    }
    assert len(expected) == 9 and landed == expected
    # Never a row of nulls: whatever does not parse whole is set aside, saying why.
    quarantined = {(r.raw, r.reason) for r in spark.table("readings_quarantine").collect()}
    assert quarantined == {
        ("{oops", "malformed JSON value"),
        ('{"device": "d9", "celsius": "warm"}', 'field celsius: "warm" is not an int'),
        ("[1]", "malformed JSON value"),
        ("", "empty value: no JSON record (a Kafka tombstone?)"),
    }
