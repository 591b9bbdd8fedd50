"""Collector envelopes of service logs, half JSON entries and half log4j lines.

A retried delivery re-sends the envelope unchanged (the ``duplicates`` knob); corrupt
lines are envelopes without their service, entries that are neither JSON nor log4j,
and text that is not JSON at all.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

from streamsmith.generate.events import (
    EventData,
    Group,
    Knobs,
    Record,
    Rule,
    generate_events,
    utc_text,
)

RULE = Rule(delay=timedelta(minutes=10))
SERVICES = ("billing", "auth", "search", "frontend")
LEVELS = (("INFO", 0.7), ("WARN", 0.2), ("ERROR", 0.1))
_LOGGERS = {
    "billing": "org.acme.Billing",
    "auth": "org.acme.auth.Login",
    "search": "org.acme.search.Query",
    "frontend": "org.acme.web.Handler",
}
_TEXTS = {"INFO": "request served", "WARN": "slow upstream", "ERROR": "charge failed"}


def logs_data(
    *,
    hosts: int,
    entries: int,
    chunks: int,
    seed: int,
    knobs: Knobs | None = None,
    start: datetime = datetime(2026, 11, 20, 10, tzinfo=UTC),
    span: timedelta = timedelta(hours=1),
) -> EventData:
    """``entries`` log entries from ``hosts`` hosts over ``span``, in collector envelopes.

    ``collected_at`` (the event time) is the entry's time plus up to two seconds.
    """
    if hosts < 1:
        raise ValueError(f"hosts must be at least 1, got {hosts}")

    def record(rng: random.Random, moment: datetime, index: int) -> Group:
        service = rng.choice(SERVICES)
        level = rng.choices([name for name, _ in LEVELS], [w for _, w in LEVELS])[0]
        logged = (moment - timedelta(milliseconds=rng.randrange(2000))).replace(
            microsecond=moment.microsecond // 1000 * 1000
        )
        thread = f"pool-{rng.randrange(1, 4)}-thread-{rng.randrange(1, 9)}"
        text = f"{_TEXTS[level]} #{index}"
        if rng.random() < 0.5:
            stamp = logged.strftime("%Y-%m-%d %H:%M:%S,") + f"{logged.microsecond // 1000:03d}"
            message = f"{stamp} {level} [{thread}] {_LOGGERS[service]} - {text}"
        else:
            message = json.dumps({"ts": utc_text(logged), "level": level.lower(),
                                  "thread": thread, "logger": _LOGGERS[service],
                                  "message": text})  # fmt: skip
        return [
            (
                moment.replace(microsecond=moment.microsecond // 1000 * 1000),
                {
                    "source": f"collector-{index % 2 + 1}",
                    "host": f"host-{rng.randrange(hosts):02d}",
                    "service": service,
                    "collector": {"id": f"c{index % 2 + 1}", "seq": index, "region": "eu-1"},
                    "message": message,
                },
            )
        ]

    return generate_events(
        record,
        RULE,
        groups=entries,
        chunks=chunks,
        seed=seed,
        knobs=knobs or Knobs(duplicates=0.05, corrupt=0.02),
        start=start,
        span=span,
        time_format=utc_text,
        key_field="service",
        time_field="collected_at",
        corrupt_lines=_CORRUPT,
    )


def entry_level_and_time(message: str) -> tuple[str, datetime]:
    """The level and time of a generated entry (the tests' ground truth)."""
    if message.startswith("{"):
        entry = json.loads(message)
        return entry["level"].upper(), datetime.fromisoformat(entry["ts"].replace("Z", "+00:00"))
    day, clock, level = message.split(" ", 3)[:3]
    moment = datetime.strptime(f"{day} {clock}", "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC)
    return level, moment


def _no_service(record: Record) -> str:
    return json.dumps({k: v for k, v in record.items() if k != "service"})


def _garbled_entry(record: Record) -> str:
    return json.dumps({**record, "message": "\tat org.acme.Billing.charge(Billing.java:42)"})


def _not_json(record: Record) -> str:
    return f"{record['collected_at']} {record['host']} {record['message']}"


_CORRUPT = (_no_service, _garbled_entry, _not_json)
