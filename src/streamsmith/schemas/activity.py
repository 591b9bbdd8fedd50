"""The heterogeneity human-activity records of the seeds' user-activity examples.

``Creation_Time`` is the event time in epoch nanoseconds (``Arrival_Time`` is epoch
milliseconds); the pipeline derives ``event_time`` from it.
"""

from __future__ import annotations

from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

ACTIVITY_SCHEMA = StructType(
    [
        StructField("Index", LongType()),
        StructField("Arrival_Time", LongType()),
        StructField("Creation_Time", LongType()),
        StructField("Device", StringType()),
        StructField("Model", StringType()),
        StructField("User", StringType()),
        StructField("gt", StringType()),
        StructField("x", DoubleType()),
        StructField("y", DoubleType()),
        StructField("z", DoubleType()),
    ]
)
