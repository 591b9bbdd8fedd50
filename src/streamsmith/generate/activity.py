"""User activity records shaped like the seeds' heterogeneity human-activity dataset."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

from streamsmith.generate.events import EventData, Group, Knobs, Record, Rule, generate_events

RULE = Rule(delay=timedelta(seconds=5))
USERS = "abcdefghi"
ACTIVITIES = ("stand", "sit", "walk", "bike", "stairsup", "stairsdown")
_MODELS = {"nexus4": "nexus4_1", "s3": "s3_1", "samsungold": "samsungold_1"}


def activity_data(
    *,
    users: int,
    events: int,
    chunks: int,
    seed: int,
    knobs: Knobs | None = None,
    start: datetime = datetime(2026, 11, 20, 10, tzinfo=UTC),
    span: timedelta = timedelta(minutes=10),
) -> EventData:
    """``events`` sensor records of ``users`` users (at most 9: a..i) over ``span``.

    ``Creation_Time`` (the event time) is in epoch nanoseconds, whole milliseconds, so the
    timestamp Spark derives from it is exact.
    """
    if not 1 <= users <= len(USERS):
        raise ValueError(f"users must be between 1 and {len(USERS)}, got {users}")

    def record(rng: random.Random, moment: datetime, index: int) -> Group:
        model = rng.choice(sorted(_MODELS))
        return [
            (
                moment.replace(microsecond=moment.microsecond // 1000 * 1000),
                {
                    "Index": index,
                    "Arrival_Time": 0,
                    "Device": _MODELS[model],
                    "Model": model,
                    "User": USERS[rng.randrange(users)],
                    "gt": rng.choice(ACTIVITIES),
                    "x": round(rng.gauss(0, 1), 6),
                    "y": round(rng.gauss(0, 1), 6),
                    "z": round(rng.gauss(9.8, 1), 6),
                },
            )
        ]

    return generate_events(
        record,
        RULE,
        groups=events,
        chunks=chunks,
        seed=seed,
        knobs=knobs or Knobs(duplicates=0.1),
        start=start,
        span=span,
        time_format=_nanos,
        key_field="User",
        time_field="Creation_Time",
        corrupt_lines=_CORRUPT,
    )


def _nanos(moment: datetime) -> int:
    """Epoch nanoseconds of a whole-millisecond moment, exactly (no float rounding)."""
    return (moment - _EPOCH) // timedelta(milliseconds=1) * 1_000_000


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _no_user(record: Record) -> str:
    return json.dumps({k: v for k, v in record.items() if k != "User"})


def _text_time(record: Record) -> str:
    return json.dumps({**record, "Creation_Time": "yesterday"})


_CORRUPT = (_no_user, _text_time)
