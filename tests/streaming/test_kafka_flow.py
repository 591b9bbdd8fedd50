"""A flow whose source is Kafka, configured by spec: JSON at the source, table and quarantine."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamsmith.config import Trigger, load_spec
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.lake import register_lake_views
from streamsmith.runtime.app import App, FlowDefinition
from streamsmith.runtime.describe import describe_plan
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import run_pipeline
from streamsmith.transforms.quarantine import READ_ERROR, REJECT_REASON, first_failure

Produce = Callable[..., None]


def readings(records: DataFrame) -> DataFrame:
    """Decoded readings, rejecting undecodable values and readings without a device."""
    return records.select(
        "json.*",
        "offset",
        "_source_file", "_position", "_raw",
        first_failure(
            (F.col(READ_ERROR).isNotNull(), F.col(READ_ERROR)),
            (F.col("json.device").isNull(), "missing device"),
        ).alias(REJECT_REASON),
    )  # fmt: skip


def test_spec_configured_kafka_flow_splits_table_and_quarantine(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, produce: Produce, tmp_path: Path
) -> None:
    good = [json.dumps({"device": f"d{i % 4}", "celsius": 20 + i / 10}).encode() for i in range(60)]
    produce(topic, [*good, b"{oops", b'{"celsius": 3.5}'])
    app = App(
        name="readings",
        description="sensor readings from Kafka",
        flows=(FlowDefinition("readings", readings, "decode readings"),),
        default_spec={
            "app": "readings",
            "sources": {
                "sensors": {
                    "format": "kafka",
                    "options": {
                        "kafka.bootstrap.servers": broker.bootstrap,
                        "subscribe": topic,
                        "startingOffsets": "earliest",
                        "maxOffsetsPerTrigger": 25,
                        "valueFormat": "json",
                        "valueSchema": "device STRING, celsius DOUBLE",
                    },
                }
            },
            "flows": {"readings": {"source": "sensors", "sink": {"table": "readings"}}},
        },
    )
    plan = build_plan(
        app, load_spec(app.default_spec, storage_root=str(tmp_path)), Trigger("available-now")
    )
    assert f"source sensors: kafka (connector auto; kafka.bootstrap.servers={broker.bootstrap}" in (
        describe_plan(plan)
    )

    report = run_pipeline(spark, plan)

    assert [q.input_rows for q in report.queries] == [62, 62]
    register_lake_views(spark, tmp_path)
    table = spark.table("readings")
    assert table.count() == 60
    assert sorted(r.celsius for r in table.collect()) == sorted(20 + i / 10 for i in range(60))
    quarantine = {
        (r.reason.split(":")[0], r.raw) for r in spark.table("readings_quarantine").collect()
    }
    assert quarantine == {
        ("invalid JSON value", "{oops"),
        ("missing device", '{"celsius": 3.5}'),
    }
    sources = {r.source_file for r in spark.table("readings_quarantine").collect()}
    assert sources <= {f"kafka://{topic}/{p}" for p in range(3)}
