"""Phone actions, the seeds' first example: ``{"phone_id", "time", "action"}`` JSON lines."""

from __future__ import annotations

from pyspark.sql.types import StringType, StructField, StructType, TimestampType

ACTION_SCHEMA = StructType(
    [
        StructField("phone_id", StringType()),
        StructField("time", TimestampType()),
        StructField("action", StringType()),  # open | close
    ]
)
