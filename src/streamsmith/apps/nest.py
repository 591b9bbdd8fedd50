"""Nest cameras: Kafka snapshots -> a Parquet archive and hourly sightings per zip code.

The e-book's end-to-end Kafka application, as two flows over the topic ``nest-logs``:

- ``camera_events`` explodes each snapshot's cameras and archives every camera record to
  the ``camera_events`` table (partitioned by date); malformed snapshots go to
  ``camera_events_quarantine``.
- ``camera_stats`` joins person sightings with the static ``device_locations`` lake table
  and writes counts per zip code and 1-hour window to the topic ``nest-camera-stats``
  (update mode, 2-hour watermark), keyed by ``to_json(struct(zip_code, window))``.

``streamsmith report nest-sightings`` reads that topic back as a batch report.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamsmith.api import Pipeline
from streamsmith.config import PipelineSpec
from streamsmith.io.sources.kafka import read_kafka
from streamsmith.transforms.nest import hourly_sightings_by_zip, latest_counts, nest_camera_events

LOGS_TOPIC = "nest-logs"
STATS_TOPIC = "nest-camera-stats"
DEFAULT_SERVERS = "127.0.0.1:9092"

pipeline = Pipeline(
    "nest",
    description="Nest camera snapshots from Kafka: archive and hourly sightings per zip code",
    sources={
        "nest_logs": {
            "format": "kafka",
            "options": {
                "subscribe": LOGS_TOPIC,
                "startingOffsets": "earliest",
                "maxOffsetsPerTrigger": 20000,
            },
        },
        "camera_stats": {
            "format": "kafka",
            "options": {"subscribe": STATS_TOPIC, "startingOffsets": "earliest"},
        },
    },
    trigger="interval=10s",
    spec={"kafka": {"bootstrap_servers": DEFAULT_SERVERS}},
    input_hint="e.g. `streamsmith generate nest --to kafka://127.0.0.1:9092/nest-logs`",
)

pipeline.flow(
    nest_camera_events,
    name="camera_events",
    source="nest_logs",
    sink={"table": "camera_events", "partition_by": ["date"]},
    description="explode devices.cameras, archive every camera record",
)


@pipeline.flow(
    source="nest_logs",
    sink={"format": "kafka", "topic": STATS_TOPIC, "output_mode": "update"},
    lookups=("device_locations",),
    quarantine=False,  # the same snapshots are quarantined by camera_events
    description="person sightings x device_locations, counted per zip and hour",
)
def camera_stats(records: DataFrame, device_locations: DataFrame) -> DataFrame:
    """Flow ``camera_stats``: hourly person sightings per zip code, for Kafka."""
    return hourly_sightings_by_zip(records, device_locations)


APP = pipeline.app


def sightings_report(spark: SparkSession, spec: PipelineSpec, min_count: int) -> DataFrame:
    """Zip codes and hours with more than ``min_count`` sightings, from the stats topic."""
    source = spec.sources["camera_stats"]
    source = source.model_copy(update={"options": spec.kafka_options(source.options)})
    stats = read_kafka(spark, source, streaming=False)
    return (
        latest_counts(stats)
        .where(F.col("sightings") > min_count)
        .orderBy(F.col("sightings").desc(), "zip_code", "window_start")
    )
