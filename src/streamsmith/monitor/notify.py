"""Notifications of failures, restarts and alerts: a webhook and/or e-mail.

Deliveries run on one background thread, so a slow or dead receiver never holds up a
query or the listener bus. Each delivery is tried ``1 + retries`` times with a bounded
timeout and a short backoff; one that still fails, or fails in any other way (a bug, a
URL the spec check let by), is reported to ``on_failure`` (the event log records
``notify_failed``), never raised into the stream nor allowed to stop the thread.
"""

from __future__ import annotations

import logging
import os
import queue
import smtplib
import threading
import time
import urllib.error
from collections.abc import Callable, Mapping
from email.message import EmailMessage
from functools import partial
from typing import Any

from streamsmith.config import NotifySpec, SmtpSpec, parse_duration
from streamsmith.io.http_json import post_json

log = logging.getLogger(__name__)

_STOP = object()


def notification_text(event: Mapping[str, Any]) -> tuple[str, str]:
    """Subject and body of the message for one event."""
    kind = str(event.get("event"))
    what = event.get("rule") or kind
    subject = f"[streamsmith] {event.get('app')}: {what} in {event.get('query') or 'the run'}"
    fields = ("time", "app", "query", "event", "rule", "attempt", "message")
    body = "\n".join(f"{key}: {event[key]}" for key in fields if event.get(key) is not None)
    return subject, body


class Notifier:
    """Queues events and delivers them to the configured webhook and SMTP server."""

    def __init__(
        self, spec: NotifySpec, on_failure: Callable[[str, str, Mapping[str, Any]], None]
    ) -> None:
        self.spec = spec
        self.on_failure = on_failure
        self.timeout = parse_duration(spec.timeout)
        self._queue: queue.Queue[object] = queue.Queue()
        self._thread = threading.Thread(target=self._deliver_all, name="notifier", daemon=True)
        self._thread.start()

    @property
    def enabled(self) -> bool:
        return self.spec.webhook is not None or self.spec.smtp is not None

    def send(self, event: Mapping[str, Any]) -> None:
        """Queue ``event`` if its kind is one the spec notifies about."""
        if self.enabled and event.get("event") in self.spec.events:
            self._queue.put(dict(event))

    def close(self, wait_seconds: float = 30.0) -> None:
        """Deliver what is queued (up to ``wait_seconds``), then stop the thread."""
        self._queue.put(_STOP)
        self._thread.join(wait_seconds)
        if self._thread.is_alive():
            log.warning("notifications still pending after %.0f s; abandoning them", wait_seconds)

    def _deliver_all(self) -> None:
        while True:
            event = self._queue.get()
            if event is _STOP:
                return
            assert isinstance(event, dict)
            if self.spec.webhook is not None:
                url = self.spec.webhook.get_secret_value()
                self._with_retries("webhook", event, partial(post_json, url, timeout=self.timeout))
            smtp = self.spec.smtp
            if smtp is not None:
                self._with_retries("smtp", event, partial(send_mail, smtp, timeout=self.timeout))

    def _with_retries(
        self, channel: str, event: dict[str, Any], deliver: Callable[[dict[str, Any]], None]
    ) -> None:
        error = ""
        for attempt in range(self.spec.retries + 1):
            if attempt:
                time.sleep(min(0.5 * 2 ** (attempt - 1), 5.0))
            try:
                deliver(event)
                return
            except (OSError, smtplib.SMTPException, urllib.error.URLError) as exc:
                error = f"{type(exc).__name__}: {exc}"
                log.warning("%s notification attempt %d failed: %s", channel, attempt + 1, error)
            except Exception as exc:  # noqa: BLE001 - the thread must outlive any error
                # Not a network failure, so a retry would fail alike: recorded (as
                # notify_failed) and the next event delivered, never a dead thread.
                error = f"{type(exc).__name__}: {exc}"
                log.warning("%s notification failed: %s", channel, type(exc).__name__)
                break
        self.on_failure(channel, error, event)


def send_mail(smtp: SmtpSpec, event: Mapping[str, Any], timeout: float) -> None:
    """Send the event's message through the configured SMTP server."""
    subject, body = notification_text(event)
    message = EmailMessage()
    message["From"] = smtp.sender
    message["To"] = ", ".join(smtp.recipients)
    message["Subject"] = subject
    message.set_content(body)
    with smtplib.SMTP(smtp.host, smtp.port, timeout=timeout) as client:
        if smtp.starttls:
            client.starttls()
        if smtp.username:
            password = os.environ.get(smtp.password_env or "", "")
            client.login(smtp.username, password)
        client.send_message(message)
