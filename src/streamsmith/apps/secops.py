"""The security platform (the slides' information-security example), part one.

Three log families arrive as JSON lines (files or Kafka): authentication, DHCP and
network flows. Each becomes a structured, date-partitioned table with its quarantine
(``auth_logs``, ``dhcp_logs``, ``flow_logs``). Two flows refine them:

- ``auth_devices``: every login with the device that held its source IP at that time
  (stream-stream join with the DHCP stream, bounded by the lease) and the device's
  owner, team and criticality from the ``assets`` inventory (stream-static join,
  listed again every micro-batch, so a replaced inventory counts from the next batch);
- ``alerts``: brute force per user and per source IP (with a cooldown), new devices and
  devices gone silent, in one alert schema with deterministic ids.

``streamsmith generate secops`` writes normal traffic with injected incidents and the
inventory. Both joins and the rules use a 5-minute watermark: events later than that
are left out of attribution and detection (Spark counts them in the query's progress,
``numRowsDroppedByWatermark``), while the structured tables keep every event.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame

from streamsmith.api import EventTime, Pipeline, Stream
from streamsmith.ml.anomaly import MODEL_NAME
from streamsmith.schemas.security import ALERT_SCHEMA, AUTH_SCHEMA, DHCP_SCHEMA, FLOW_SCHEMA
from streamsmith.transforms.secops import (
    EVENT_TIME,
    alert_messages,
    alert_rows,
    attributed_logins,
    auth_events,
    dated,
    dhcp_events,
    flow_events,
    lease_history,
    outside_logins,
    security_alerts,
)

LATENESS = "5 minutes"
THRESHOLD, WINDOW, COOLDOWN = 10, "5 minutes", "30 minutes"
SILENCE = "25 minutes"
RULE = EventTime(EVENT_TIME, LATENESS)
DHCP = Stream("dhcp", dhcp_events, DHCP_SCHEMA)
LoginFlow = Callable[..., DataFrame]

pipeline = Pipeline(
    "secops",
    description="security logs structured, attributed to devices and owners, and alerted on",
    sources={
        "auth": {"format": "jsonl", "path": "input/secops/auth"},
        "dhcp": {"format": "jsonl", "path": "input/secops/dhcp"},
        "flows": {"format": "jsonl", "path": "input/secops/flows"},
        "alert_stream": {"format": "parquet", "path": "tables/alerts"},
    },
    trigger="interval=10s",
    input_hint="e.g. `streamsmith generate secops`",
)

for name, source, parse, schema, kind in (
    ("auth_logs", "auth", auth_events, AUTH_SCHEMA, "authentication logs"),
    ("dhcp_logs", "dhcp", dhcp_events, DHCP_SCHEMA, "DHCP logs"),
    ("flow_logs", "flows", flow_events, FLOW_SCHEMA, "network flow records"),
):
    pipeline.flow(
        dated,
        name=name,
        source=source,
        sink={"table": name, "partition_by": ["date"]},
        parse=parse,
        schema=schema,
        description=f"{kind}, typed, by date",
    )


@pipeline.flow(
    source="dhcp",
    sink={"table": "leases"},
    parse=dhcp_events,
    schema=DHCP_SCHEMA,
    event_time=RULE,
    stateful=True,
    quarantine=False,  # the dhcp_logs flow quarantines bad DHCP records
    record_late=False,
    batch_arguments={"close_at_end": True},
    description="DHCP leases per IP, closed by release, expiry (a timer) or reassignment",
)
def leases(dhcp: DataFrame, event_time: EventTime, close_at_end: bool = False) -> DataFrame:
    return lease_history(dhcp, event_time.lateness, close_at_end=close_at_end)


def _over_logins(
    sink: dict[str, Any],
    streams: tuple[Stream, ...],
    description: str,
    **more: Any,
) -> Callable[[LoginFlow], LoginFlow]:
    """A flow over logins with the DHCP stream (and ``streams``) beside them and the
    inventory (a lake table); the auth_logs flow quarantines bad logins for them."""
    return pipeline.flow(
        source="auth",
        sink=sink,
        parse=auth_events,
        schema=AUTH_SCHEMA,
        lookups=("assets",),
        streams=streams,
        event_time=RULE,
        stateful=True,
        quarantine=False,
        record_late=False,
        description=description,
        **more,
    )


@_over_logins(
    {"table": "auth_devices", "partition_by": ["date"]},
    (DHCP,),
    "logins x DHCP leases (stream-stream, lease-bounded) x assets",
)
def auth_devices(
    auth: DataFrame, dhcp: DataFrame, assets: DataFrame, event_time: EventTime
) -> DataFrame:
    return attributed_logins(auth, dhcp, assets, delay=event_time.lateness)


@_over_logins(
    # Parquet: the alert_topic and alert_webhook flows read it back as a stream through
    # the parquet file source, which follows Spark's file-sink log (not a Delta log).
    {"format": "parquet", "table": "alerts"},
    (DHCP, Stream("flows", flow_events, FLOW_SCHEMA)),
    f"brute force (>= {THRESHOLD} failures in {WINDOW}, {COOLDOWN} cooldown), "
    f"new and silent ({SILENCE}) devices, anomalous hosts (model {MODEL_NAME})",
    models=(MODEL_NAME,),
    batch_arguments={"close_at_end": True},
)
def alerts(
    auth: DataFrame,
    dhcp: DataFrame,
    assets: DataFrame,
    flows: DataFrame,
    models: dict[str, str],
    event_time: EventTime,
    close_at_end: bool = False,
) -> DataFrame:
    return security_alerts(
        auth,
        dhcp,
        assets,
        flows,
        models,
        delay=event_time.lateness,
        threshold=THRESHOLD,
        window=WINDOW,
        cooldown=COOLDOWN,
        silence=SILENCE,
        close_at_end=close_at_end,
    )


# Off by default: each login from outside the office network to a Kafka topic as it
# happens; stateless, so it runs in Real-time Mode (docs/apps/secops.md).
pipeline.flow(
    outside_logins,
    name="outside_logins",
    source="auth",
    sink={"format": "kafka", "topic": "instant-alerts"},
    parse=auth_events,
    schema=AUTH_SCHEMA,
    quarantine=False,  # the auth_logs flow quarantines bad logins
    record_late=False,
    enabled=False,
    description="each login from outside the office network, alerted as it happens",
)

# The alerts table read back as a stream, for delivery (off by default).
pipeline.flow(
    alert_messages,
    name="alert_topic",
    source="alert_stream",
    sink={"format": "kafka", "topic": "alerts"},
    schema=ALERT_SCHEMA,
    parse=False,  # a lake table: its rows are read as they were written
    quarantine=False,
    enabled=False,
    description="new rows of the alerts table to Kafka, keyed by alert_id",
)
pipeline.flow(
    alert_rows,
    name="alert_webhook",
    source="alert_stream",
    sink={"format": "webhook", "table": "alert_webhook_undelivered"},
    schema=ALERT_SCHEMA,
    parse=False,
    quarantine=False,
    enabled=False,
    description="new rows of the alerts table POSTed to a webhook",
)

APP = pipeline.app
