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

from collections.abc import Mapping
from functools import partial
from typing import Any

from streamsmith.ml.anomaly import MODEL_NAME
from streamsmith.runtime.app import App, EventTime, FlowDefinition, StreamInput, Transform
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
    security_alerts,
)

DELAY = "5 minutes"
THRESHOLD, WINDOW, COOLDOWN = 10, "5 minutes", "30 minutes"
SILENCE = "25 minutes"

DEFAULT_SPEC = {
    "app": "secops",
    "trigger": "interval=10s",
    "sources": {
        "auth": {"format": "jsonl", "path": "input/secops/auth"},
        "dhcp": {"format": "jsonl", "path": "input/secops/dhcp"},
        "flows": {"format": "jsonl", "path": "input/secops/flows"},
        "alert_stream": {"format": "parquet", "path": "tables/alerts"},
    },
    "flows": {
        "auth_logs": {"source": "auth", "sink": {"table": "auth_logs", "partition_by": ["date"]}},
        "dhcp_logs": {"source": "dhcp", "sink": {"table": "dhcp_logs", "partition_by": ["date"]}},
        "flow_logs": {"source": "flows", "sink": {"table": "flow_logs", "partition_by": ["date"]}},
        "auth_devices": {
            "source": "auth",
            "streams": {"dhcp": "dhcp"},
            "sink": {"table": "auth_devices", "partition_by": ["date"]},
        },
        "leases": {"source": "dhcp", "sink": {"table": "leases"}},
        "alerts": {
            "source": "auth",
            "streams": {"dhcp": "dhcp", "flows": "flows"},
            "sink": {"table": "alerts"},
        },
        "alert_topic": {
            "source": "alert_stream",
            "enabled": False,
            "sink": {"format": "kafka", "topic": "alerts"},
        },
        "alert_webhook": {
            "source": "alert_stream",
            "enabled": False,
            "sink": {"format": "webhook", "table": "alert_webhook_undelivered"},
        },
    },
}


def _joined(
    name: str,
    transform: Transform,
    description: str,
    *extra: StreamInput,
    models: tuple[str, ...] = (),
    batch_arguments: Mapping[str, Any] | None = None,
) -> FlowDefinition:
    """A flow over logins with the DHCP stream (and ``extra`` streams) and the inventory
    beside them."""
    return FlowDefinition(
        name=name,
        prepare=auth_events,
        transform=transform,
        description=description,
        record_schema=AUTH_SCHEMA,
        quarantine=False,  # the auth_logs flow quarantines bad logins
        lookups=("assets",),
        streams=(StreamInput("dhcp", dhcp_events, DHCP_SCHEMA), *extra),
        models=models,
        event_time=EventTime(EVENT_TIME, DELAY),
        stateful=True,
        record_late=False,
        batch_arguments=batch_arguments or {},
    )


APP = App(
    name="secops",
    description="security logs structured, attributed to devices and owners, and alerted on",
    flows=(
        FlowDefinition(
            name="auth_logs",
            prepare=auth_events,
            transform=dated,
            description="authentication logs, typed, by date",
            record_schema=AUTH_SCHEMA,
        ),
        FlowDefinition(
            name="dhcp_logs",
            prepare=dhcp_events,
            transform=dated,
            description="DHCP logs, typed, by date",
            record_schema=DHCP_SCHEMA,
        ),
        FlowDefinition(
            name="flow_logs",
            prepare=flow_events,
            transform=dated,
            description="network flow records, typed, by date",
            record_schema=FLOW_SCHEMA,
        ),
        FlowDefinition(
            name="leases",
            prepare=dhcp_events,
            transform=partial(lease_history, delay=DELAY),
            batch_arguments={"close_at_end": True},
            description="DHCP leases per IP, closed by release, expiry (a timer) or reassignment",
            record_schema=DHCP_SCHEMA,
            quarantine=False,  # the dhcp_logs flow quarantines bad DHCP records
            event_time=EventTime(EVENT_TIME, DELAY),
            stateful=True,
            record_late=False,
        ),
        _joined(
            "auth_devices",
            partial(attributed_logins, delay=DELAY),
            "logins x DHCP leases (stream-stream, lease-bounded) x assets",
        ),
        _joined(
            "alerts",
            partial(
                security_alerts,
                delay=DELAY,
                threshold=THRESHOLD,
                window=WINDOW,
                cooldown=COOLDOWN,
                silence=SILENCE,
            ),
            f"brute force (>= {THRESHOLD} failures in {WINDOW}, {COOLDOWN} cooldown), "
            f"new and silent ({SILENCE}) devices, anomalous hosts (model {MODEL_NAME})",
            StreamInput("flows", flow_events, FLOW_SCHEMA),
            models=(MODEL_NAME,),
            batch_arguments={"close_at_end": True},
        ),
        FlowDefinition(
            name="alert_topic",
            transform=alert_messages,
            description="new rows of the alerts table to Kafka, keyed by alert_id",
            record_schema=ALERT_SCHEMA,
            quarantine=False,
        ),
        FlowDefinition(
            name="alert_webhook",
            transform=alert_rows,
            description="new rows of the alerts table POSTed to a webhook",
            record_schema=ALERT_SCHEMA,
            quarantine=False,
        ),
    ),
    default_spec=DEFAULT_SPEC,
    input_hint="e.g. `streamsmith generate secops`",
)
