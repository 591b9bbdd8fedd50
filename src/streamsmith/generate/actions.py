"""Phone actions: each phone opens, then closes a few minutes later.

An open and its close travel as one group, so they are delayed or dropped together and a
close is never delivered before its open: at every prefix of the input the counted
closes never outnumber the counted opens, the seeds' promise for this example.
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

# The app's default: hourly windows, events up to a day late still counted.
RULE = Rule(delay=timedelta(days=1), window=timedelta(hours=1))


def actions_data(
    *,
    phones: int,
    sessions: int,
    chunks: int,
    seed: int,
    knobs: Knobs | None = None,
    start: datetime = datetime(2026, 11, 20, 9, tzinfo=UTC),
    span: timedelta = timedelta(hours=6),
    rule: Rule = RULE,
) -> EventData:
    """``sessions`` open/close pairs of ``phones`` phones over ``span``, labelled for the
    watermark ``rule`` (pass the lateness the app runs with)."""
    if phones < 1:
        raise ValueError(f"phones must be at least 1, got {phones}")

    def session(rng: random.Random, moment: datetime, _index: int) -> Group:
        phone = f"phone-{rng.randrange(phones):04d}"
        closed = moment + timedelta(seconds=rng.randint(30, 600))
        return [
            (moment, {"phone_id": phone, "action": "open"}),
            (closed, {"phone_id": phone, "action": "close"}),
        ]

    return generate_events(
        session,
        rule,
        groups=sessions,
        chunks=chunks,
        seed=seed,
        knobs=knobs or Knobs(),
        start=start,
        span=span,
        time_format=utc_text,
        key_field="phone_id",
        time_field="time",
        corrupt_lines=_CORRUPT,
    )


def _truncated(record: Record) -> str:
    return json.dumps(record)[:-12]


def _unknown_action(record: Record) -> str:
    return json.dumps({**record, "action": "swipe"})


def _no_time(record: Record) -> str:
    return json.dumps({k: v for k, v in record.items() if k != "time"})


_CORRUPT = (_truncated, _unknown_action, _no_time)
