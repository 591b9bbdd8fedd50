"""Nest API snapshots, as published on the ``nest-logs`` topic (the e-book's Nest example).

One Kafka record holds one snapshot ``{"metadata", "devices", "structures"}``. Devices and
structures are JSON objects keyed by id, hence Spark maps: ``explode(devices.cameras)``
yields one ``(key, value)`` row per camera, and ``value.*`` is a :data:`CAMERA_SCHEMA` row.
Field names follow the seed's schema verbatim, including ``is_audio_input_enable``.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

# Timestamps look like ``2026-11-20T10:02:13.481Z``. The seed writes ``.sss``, a typo:
# lower-case ``s`` is seconds again, upper-case ``SSS`` is the fraction of a second.
NEST_TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"


def _strings(*names: str) -> list[StructField]:
    return [StructField(name, StringType()) for name in names]


LAST_EVENT_SCHEMA = StructType(
    [
        StructField("has_sound", BooleanType()),
        StructField("has_motion", BooleanType()),
        StructField("has_person", BooleanType()),
        StructField("start_time", TimestampType()),
        StructField("end_time", TimestampType()),
        StructField("urls_expire_time", TimestampType()),
        *_strings("web_url", "app_url", "image_url", "animated_image_url"),
        StructField("activity_zone_ids", ArrayType(StringType())),
    ]
)

CAMERA_SCHEMA = StructType(
    [
        *_strings(
            "device_id",
            "software_version",
            "structure_id",
            "where_id",
            "where_name",
            "name",
            "name_long",
        ),
        StructField("is_online", BooleanType()),
        StructField("is_streaming", BooleanType()),
        StructField("is_audio_input_enable", BooleanType()),
        StructField("last_is_online_change", TimestampType()),
        StructField("is_video_history_enabled", BooleanType()),
        *_strings("web_url", "app_url"),
        StructField("is_public_share_enabled", BooleanType()),
        StructField("activity_zones", ArrayType(StructType(_strings("name", "id")))),
        *_strings("public_share_url", "snapshot_url"),
        StructField("last_event", LAST_EVENT_SCHEMA),
    ]
)

_DEVICE_HEAD = (
    "device_id",
    "locale",
    "software_version",
    "structure_id",
    "name",
    "name_long",
)

THERMOSTAT_SCHEMA = StructType(
    [
        *_strings(*_DEVICE_HEAD),
        StructField("last_connection", TimestampType()),
        StructField("is_online", BooleanType()),
        StructField("hvac_mode", StringType()),
        StructField("ambient_temperature_c", DoubleType()),
        StructField("target_temperature_c", DoubleType()),
        StructField("humidity", IntegerType()),
    ]
)

SMOKE_CO_ALARM_SCHEMA = StructType(
    [
        *_strings(*_DEVICE_HEAD),
        StructField("last_connection", TimestampType()),
        StructField("is_online", BooleanType()),
        *_strings("battery_health", "co_alarm_state", "smoke_alarm_state", "ui_color_state"),
    ]
)

STRUCTURE_SCHEMA = StructType(
    [
        *_strings("structure_id", "name", "country_code", "postal_code", "time_zone", "away"),
        StructField("thermostats", ArrayType(StringType())),
        StructField("smoke_co_alarms", ArrayType(StringType())),
        StructField("cameras", ArrayType(StringType())),
    ]
)

NEST_SCHEMA = StructType(
    [
        StructField(
            "metadata",
            StructType(
                [
                    StructField("access_token", StringType()),
                    StructField("client_version", IntegerType()),
                ]
            ),
        ),
        StructField(
            "devices",
            StructType(
                [
                    StructField("thermostats", MapType(StringType(), THERMOSTAT_SCHEMA)),
                    StructField("smoke_co_alarms", MapType(StringType(), SMOKE_CO_ALARM_SCHEMA)),
                    StructField("cameras", MapType(StringType(), CAMERA_SCHEMA)),
                ]
            ),
        ),
        StructField("structures", MapType(StringType(), STRUCTURE_SCHEMA)),
    ]
)

# The static table `device_locations`: where each registered device is installed.
DEVICE_LOCATIONS_SCHEMA = StructType(_strings("device_id", "zip_code"))
