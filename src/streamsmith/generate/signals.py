"""IoT signals: one reading per event from a fleet of devices."""

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

RULE = Rule(delay=timedelta(minutes=10), window=timedelta(minutes=10), slide=timedelta(minutes=5))


def signals_data(
    *,
    devices: int,
    events: int,
    chunks: int,
    seed: int,
    knobs: Knobs | None = None,
    start: datetime = datetime(2026, 11, 20, 12, tzinfo=UTC),
    span: timedelta = timedelta(hours=2),
) -> EventData:
    """``events`` readings of ``devices`` devices over ``span``."""
    if devices < 1:
        raise ValueError(f"devices must be at least 1, got {devices}")

    def reading(rng: random.Random, moment: datetime, _index: int) -> Group:
        device = f"dev-{rng.randrange(devices):04d}"
        return [(moment, {"deviceId": device, "signal": round(rng.uniform(0, 100), 3)})]

    return generate_events(
        reading,
        RULE,
        groups=events,
        chunks=chunks,
        seed=seed,
        knobs=knobs or Knobs(),
        start=start,
        span=span,
        time_format=utc_text,
        key_field="deviceId",
        time_field="eventTime",
        corrupt_lines=_CORRUPT,
    )


def _wrong_type(record: Record) -> str:
    return json.dumps({**record, "signal": "high"})


def _no_device(record: Record) -> str:
    return json.dumps({k: v for k, v in record.items() if k != "deviceId"})


def _not_json(record: Record) -> str:
    return f"{record['deviceId']} {record['eventTime']} {record['signal']}"


_CORRUPT = (_wrong_type, _no_device, _not_json)
