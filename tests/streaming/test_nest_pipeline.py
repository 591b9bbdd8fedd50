"""The Nest app end to end on the embedded broker: archive, sightings topic, report."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

from pyspark.sql import SparkSession

from streamsmith.apps.nest import APP, sightings_report
from streamsmith.config import Trigger, load_spec
from streamsmith.generate.nest import nest_data, publish
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.kafka.client import ensure_topic
from streamsmith.io.lake import read_table, register_lake_views, replace_static_table, table_path
from streamsmith.io.sources.kafka import read_kafka
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import backfill, run_pipeline
from streamsmith.schemas.nest import DEVICE_LOCATIONS_SCHEMA


def test_nest_flows_and_report_match_the_generated_counts(
    spark: SparkSession, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    logs, stats = f"nest-logs-{uuid.uuid4().hex[:6]}", f"nest-stats-{uuid.uuid4().hex[:6]}"
    ensure_topic(broker.bootstrap, logs, 3)
    ensure_topic(broker.bootstrap, stats, 2)
    data = nest_data(devices=16, events=240, seed=3, corrupt_fraction=0.05)
    assert publish(data, broker.bootstrap, logs) == 240
    replace_static_table(
        table_path(tmp_path, "device_locations"), data.locations, DEVICE_LOCATIONS_SCHEMA
    )
    spec = load_spec(
        APP.default_spec,
        sets=[
            f"kafka.bootstrap_servers={broker.bootstrap}",
            f"sources.nest_logs.options.subscribe={logs}",
            f"sources.camera_stats.options.subscribe={stats}",
            f"flows.camera_stats.sink.topic={stats}",
        ],
        storage_root=str(tmp_path),
    )

    run = run_pipeline(spark, build_plan(APP, spec, Trigger("available-now")))

    register_lake_views(spark, tmp_path)
    assert spark.table("camera_events").count() == data.camera_records
    quarantine = spark.table("camera_events_quarantine").collect()
    assert len(quarantine) == data.corrupt_messages > 0
    assert {row.reason for row in quarantine} == {"malformed Nest JSON"}
    assert all(row.source_file.startswith(f"kafka://{logs}/") for row in quarantine)

    # The stats query writes to Spark's Kafka sink, which counts the rows it writes: the
    # query keeps no count of its own, and its rows written are the topic's records.
    source = spec.sources["camera_stats"]
    source = source.model_copy(update={"options": spec.kafka_options(source.options)})
    records = read_kafka(spark, source, streaming=False).count()
    written = {query.name: query.output_rows for query in run.queries}
    assert written["nest.camera_stats"] == records >= len(data.sightings)

    report = {
        (row.zip_code, row.window_start.replace(tzinfo=dt.UTC)): row.sightings
        for row in sightings_report(spark, spec, 0).collect()
    }
    assert report == data.sightings
    busiest = max(data.sightings.values())
    above = sightings_report(spark, spec, busiest - 1).collect()
    assert {row.sightings for row in above} == {busiest}

    backfill(spark, build_plan(APP, spec))
    stats_backfill = read_table(spark, tmp_path / "backfill/camera_stats")
    assert sorted(int(r.value) for r in stats_backfill.collect()) == sorted(data.sightings.values())
