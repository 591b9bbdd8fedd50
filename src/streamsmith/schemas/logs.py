"""Log-collector envelopes (e-book Part 3): one JSON object per collected log entry.

``collector`` repeats unchanged when the collector retries a delivery, which is what the
pipeline deduplicates on; ``message`` is the entry itself, a JSON object or a log4j line.
"""

from __future__ import annotations

from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

COLLECTOR_SCHEMA = StructType(
    [
        StructField("id", StringType()),
        StructField("seq", LongType()),
        StructField("region", StringType()),
    ]
)

ENVELOPE_SCHEMA = StructType(
    [
        StructField("source", StringType()),
        StructField("host", StringType()),
        StructField("service", StringType()),
        StructField("collected_at", TimestampType()),
        StructField("collector", COLLECTOR_SCHEMA),
        StructField("message", StringType()),
    ]
)

# A JSON log entry: what structured loggers (logstash-style encoders) write.
JSON_MESSAGE_SCHEMA = StructType(
    [
        StructField("ts", TimestampType()),
        StructField("level", StringType()),
        StructField("thread", StringType()),
        StructField("logger", StringType()),
        StructField("message", StringType()),
    ]
)
