"""Nest camera snapshots -> camera records and hourly person sightings per zip code.

The e-book's Kafka example: each Kafka record holds one Nest API snapshot whose
``devices.cameras`` is a map keyed by device id. :func:`nest_camera_events` parses the
snapshot and explodes the cameras into one tagged row each (a malformed snapshot becomes
one rejected row); :func:`hourly_sightings_by_zip` joins the person sightings with the
static ``device_locations`` table and counts them per zip code and hour, as key/value
records for a Kafka topic.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from streamsmith.schemas.nest import CAMERA_SCHEMA, NEST_SCHEMA, NEST_TIMESTAMP_FORMAT
from streamsmith.transforms.quarantine import (
    POSITION,
    RAW,
    REJECT_REASON,
    SOURCE_FILE,
    accepted,
    reject_reason,
)

_CORRUPT = "_corrupt_record"
_SNAPSHOT_SCHEMA = StructType([*NEST_SCHEMA.fields, StructField(_CORRUPT, StringType())])
_JSON_OPTIONS = {
    "timestampFormat": NEST_TIMESTAMP_FORMAT,
    "mode": "PERMISSIVE",
    "columnNameOfCorruptRecord": _CORRUPT,
}


def nest_camera_events(records: DataFrame) -> DataFrame:
    """Kafka records of Nest snapshots -> one tagged row per camera in each snapshot.

    Columns: the camera fields, ``kafka_partition``, ``kafka_offset``, ``date`` (of the
    camera's last event, else of the Kafka record) and the quarantine tags. Snapshots
    without cameras yield nothing; unreadable ones yield one rejected row.
    """
    snapshot = F.from_json(F.col("value").cast("string"), _SNAPSHOT_SCHEMA, _JSON_OPTIONS)
    parsed = records.withColumn("_snapshot", snapshot)
    problem = reject_reason(
        (F.col(f"_snapshot.{_CORRUPT}").isNotNull(), "malformed Nest JSON"),
        (F.col("_snapshot.devices").isNull(), "snapshot has no devices"),
    )
    no_camera = F.lit(None).cast(CAMERA_SCHEMA)
    items = F.when(
        problem.isNull(),
        F.transform(
            F.map_values("_snapshot.devices.cameras"),
            lambda camera: F.struct(
                camera.alias("camera"), F.lit(None).cast("string").alias("problem")
            ),
        ),
    ).otherwise(F.array(F.struct(no_camera.alias("camera"), problem.alias("problem"))))
    exploded = parsed.select(
        F.explode(items).alias("_item"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("_kafka_time"),
        SOURCE_FILE,
        POSITION,
        RAW,
    )
    return exploded.select(
        *[F.col(f"_item.camera.{field.name}").alias(field.name) for field in CAMERA_SCHEMA.fields],
        "kafka_partition",
        "kafka_offset",
        F.to_date(F.coalesce(F.col("_item.camera.last_event.start_time"), "_kafka_time")).alias(
            "date"
        ),
        SOURCE_FILE,
        POSITION,
        RAW,
        F.col("_item.problem").alias(REJECT_REASON),
    )


def person_sightings(cameras: DataFrame) -> DataFrame:
    """Cameras whose last event saw a person: ``device_id, start_time``."""
    return cameras.where(F.col("last_event.has_person")).select(
        "device_id", F.col("last_event.start_time").alias("start_time")
    )


def hourly_sightings_by_zip(
    records: DataFrame, device_locations: DataFrame, *, watermark: str = "2 hours"
) -> DataFrame:
    """Person sightings per zip code per hour of ``start_time``, as Kafka key/value.

    Key: ``to_json(struct(zip_code, window))``; value: the count as a string, as in the
    e-book. In update mode each batch re-emits the windows it changed, so the latest
    record per key holds the current count. Cameras without a registered location drop
    out of the inner join; sightings older than the watermark are not counted.
    """
    sightings = person_sightings(accepted(nest_camera_events(records)))
    located = sightings.join(device_locations.select("device_id", "zip_code"), "device_id")
    counts = (
        located.withWatermark("start_time", watermark)
        .groupBy("zip_code", F.window("start_time", "1 hour"))
        .count()
    )
    return counts.select(
        F.to_json(F.struct("zip_code", "window")).alias("key"),
        F.col("count").cast("string").alias("value"),
    )


def latest_counts(stats: DataFrame) -> DataFrame:
    """The current count per key of a sightings topic (batch read of key/value records).

    Takes the newest record per key by (timestamp, partition, offset), which is right
    whether or not the topic has been compacted.
    """
    newest = stats.groupBy(F.col("key").cast("string").alias("key")).agg(
        F.max_by(F.col("value").cast("string"), F.struct("timestamp", "partition", "offset")).alias(
            "value"
        )
    )
    return newest.select(
        F.get_json_object("key", "$.zip_code").alias("zip_code"),
        F.get_json_object("key", "$.window.start").cast("timestamp").alias("window_start"),
        F.get_json_object("key", "$.window.end").cast("timestamp").alias("window_end"),
        F.col("value").cast("long").alias("sightings"),
    )
