"""The Yahoo Streaming Benchmark: ad events as JSON lines and the ad -> campaign table.

An event is ``{"user_id", "page_id", "ad_id", "ad_type", "event_type", "event_time",
"ip_address"}`` (about 250 bytes as JSON; ids are UUIDs, ``event_time`` ISO-8601 UTC).
"""

from __future__ import annotations

from pyspark.sql.types import StringType, StructField, StructType, TimestampType

AD_EVENT_SCHEMA = StructType(
    [
        StructField("user_id", StringType()),
        StructField("page_id", StringType()),
        StructField("ad_id", StringType()),
        StructField("ad_type", StringType()),
        StructField("event_type", StringType()),
        StructField("event_time", TimestampType()),
        StructField("ip_address", StringType()),
    ]
)

CAMPAIGNS_SCHEMA = StructType(
    [StructField("ad_id", StringType()), StructField("campaign_id", StringType())]
)

AD_TYPES = ("banner", "modal", "sponsored-search", "mail", "mobile")
EVENT_TYPES = ("view", "click", "purchase")
