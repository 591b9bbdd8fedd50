"""IoT device signals: ``{"eventTime", "deviceId", "signal"}`` JSON lines."""

from __future__ import annotations

from pyspark.sql.types import DoubleType, StringType, StructField, StructType, TimestampType

SIGNAL_SCHEMA = StructType(
    [
        StructField("eventTime", TimestampType()),
        StructField("deviceId", StringType()),
        StructField("signal", DoubleType()),
    ]
)
