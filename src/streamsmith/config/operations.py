"""The spec's operations sections: service-level alert rules, the event log
(``monitor``), notifications (``notify``) and the supervisor's restarts."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, SecretStr

from streamsmith.config.base import Duration, StrictModel


class AlertRules(StrictModel):
    """Service-level alerts, evaluated on every progress event of every query.

    An alert is raised when its condition starts to hold and again only after it has
    cleared, so a sustained problem raises one alert, not one per batch. ``None`` (or
    ``false``) turns a rule off.
    """

    falling_behind_batches: int | None = Field(
        default=3, gt=0, description="input rate above processing rate for this many batches"
    )
    slow_batches: bool = Field(
        default=True, description="a batch took longer than the trigger interval"
    )
    max_lag: int | None = Field(default=None, ge=0, description="records or files behind")
    max_watermark_delay: Duration | None = Field(
        default=None, description="batch time minus watermark, e.g. 15m"
    )
    max_quarantine_ratio: float | None = Field(
        default=None, gt=0, le=1, description="quarantined rows / input rows in one batch"
    )


class MonitorSpec(StrictModel):
    """Where progress goes besides the event log (``<storage_root>/_monitor/events``).

    ``kafka_topic`` forwards every event to a topic of the pipeline's Kafka cluster;
    ``metrics_port`` serves Prometheus ``/metrics`` and a ``/health`` check on 127.0.0.1.
    A run writes its events to a file of its own (about 3 KB per batch and query, most
    of it Spark's full progress report) and starts a new one when that passes
    ``file_mb``; at its start and at each new file it deletes the app's event logs last
    written more than ``retention`` ago.
    """

    kafka_topic: str | None = Field(default=None, description="also send events to this topic")
    metrics_port: int | None = Field(
        default=None, ge=0, le=65535, description="serve /metrics and /health on 127.0.0.1"
    )
    retention: Duration = Field(default="14d", description="event logs older than this are deleted")
    file_mb: float = Field(
        default=64, gt=0, description="a run starts a new event log file past this size (MB)"
    )
    alerts: AlertRules = Field(default_factory=AlertRules)


class SmtpSpec(StrictModel):
    """An SMTP server for notification e-mail; the password comes from ``password_env``."""

    host: str
    port: int = Field(default=25, gt=0, le=65535)
    sender: str = Field(description="the From address")
    recipients: tuple[str, ...] = Field(min_length=1)
    username: str | None = None
    password_env: str | None = Field(
        default=None, description="the environment variable holding the password"
    )
    starttls: bool = False


NotifyEvent = Literal["failure", "restart", "gave_up", "alert", "schema_change"]


def _an_http_url(url: SecretStr) -> SecretStr:
    """``url`` when it is http(s) with a host: checked when the spec loads, so a delivery
    thread never meets a URL it cannot post to. The message leaves the URL (a secret) out."""
    if not re.match(r"https?://[^/?#\s]+", url.get_secret_value()):
        raise ValueError("url must be an http:// or https:// URL with a host")
    return url


HttpUrlSecret = Annotated[SecretStr, AfterValidator(_an_http_url)]
"""A webhook's URL: a secret (it often holds a token), http:// or https:// with a host."""


class NotifySpec(StrictModel):
    """Who hears about failures, restarts and alerts: a webhook (JSON POST) and/or e-mail.

    Deliveries run off the stream's threads with a bounded wait and ``retries``; a
    delivery that still fails is recorded in the event log (``notify_failed``) and
    never stops a query. The webhook URL is treated as a secret (it often holds a token).
    """

    webhook: HttpUrlSecret | None = Field(
        default=None, description="http(s) URL to POST events to (a secret)"
    )
    smtp: SmtpSpec | None = None
    timeout: Duration = Field(default="5s", description="the longest wait for one delivery")
    retries: int = Field(default=3, ge=0, description="further attempts of a failed delivery")
    events: tuple[NotifyEvent, ...] = Field(
        default=("failure", "restart", "gave_up", "alert", "schema_change"),
        description="what is notified",
    )


class SupervisorSpec(StrictModel):
    """Restarts of failed queries: from their checkpoint, after an exponential backoff
    (``backoff``, doubling up to ``max_backoff``), at most ``max_retries`` times in a row;
    then the run stops and exits non-zero. A batch that completes resets the count."""

    max_retries: int = Field(default=3, ge=0, description="restarts in a row before giving up")
    backoff: Duration = Field(default="2s", description="the wait before the first restart")
    max_backoff: Duration = Field(default="1m", description="the longest wait between restarts")
