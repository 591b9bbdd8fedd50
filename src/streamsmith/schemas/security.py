"""The security platform's log families, its asset inventory and its alerts.

Every log record carries its own ``event_time`` (ISO-8601 UTC) and an ``event_id`` the
collector assigns, so a record can be traced from the raw file to every table and
alert derived from it.
"""

from __future__ import annotations

from pyspark.sql.types import (
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

# Authentication logs (SSH, VPN, SSO): who tried to log in, from where, and how it went.
AUTH_SCHEMA = StructType(
    [
        StructField("event_id", StringType()),
        StructField("event_time", TimestampType()),
        StructField("user", StringType()),
        StructField("src_ip", StringType()),
        StructField("result", StringType()),
        StructField("method", StringType()),
    ]
)
AUTH_RESULTS = ("success", "failure")

# DHCP server logs: which device (MAC) holds which IP, for how long.
DHCP_SCHEMA = StructType(
    [
        StructField("event_id", StringType()),
        StructField("event_time", TimestampType()),
        StructField("ip", StringType()),
        StructField("mac", StringType()),
        StructField("hostname", StringType()),
        StructField("action", StringType()),
        StructField("lease_seconds", LongType()),
    ]
)
DHCP_ACTIONS = ("assign", "renew", "release")

# Network flow records (NetFlow/IPFIX summaries): who talked to whom, how much.
FLOW_SCHEMA = StructType(
    [
        StructField("event_id", StringType()),
        StructField("event_time", TimestampType()),
        StructField("src_ip", StringType()),
        StructField("dst_ip", StringType()),
        StructField("dst_port", IntegerType()),
        StructField("protocol", StringType()),
        StructField("bytes", LongType()),
    ]
)

# The asset inventory (a lake lookup table): who owns each known device.
ASSETS_SCHEMA = StructType(
    [
        StructField("mac", StringType()),
        StructField("hostname", StringType()),
        StructField("owner", StringType()),
        StructField("team", StringType()),
        StructField("criticality", StringType()),
    ]
)

# One alert, whatever rule raised it. ``alert_id`` is derived from the rule, the entity
# and the evidence's first event, so a replayed batch raises the same id again.
ALERT_SCHEMA = StructType(
    [
        StructField("alert_id", StringType()),
        StructField("rule", StringType()),
        StructField("severity", StringType()),
        StructField("entity", StringType()),
        StructField("window_start", TimestampType()),
        StructField("window_end", TimestampType()),
        StructField("evidence", StringType()),
        StructField("first_seen", TimestampType()),
        StructField("last_seen", TimestampType()),
    ]
)
