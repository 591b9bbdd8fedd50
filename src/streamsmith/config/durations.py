"""Durations (``90s``, ``5 minutes``), triggers (``interval=10s``, ``available-now``) and
cron schedules, as a spec writes them; plain Python, no models."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

_DURATION_UNITS = {
    "ms": 0.001,
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
    "days": 86400.0,
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$")


def parse_duration(text: str) -> float:
    """Seconds in a human duration such as ``10s``, ``500ms``, ``2 minutes`` or ``1h``."""
    match = _DURATION.match(text.lower())
    if not match or match.group(2) not in _DURATION_UNITS:
        raise ValueError(
            f"invalid duration {text!r}: write a number and a unit, e.g. 500ms, 10s, 5m, 1h"
        )
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]


_SPARK_UNITS = {0.001: "millisecond", 1.0: "second", 60.0: "minute", 3600.0: "hour", 86400.0: "day"}


def spark_duration(text: str) -> str:
    """``text`` (any spelling :func:`parse_duration` reads: ``10s``, ``2h``, ``1 day``) as
    an interval Spark reads in ``withWatermark`` and ``window``: ``10 seconds``..."""
    parse_duration(text)
    match = _DURATION.match(text.lower())
    assert match is not None  # parse_duration accepted it
    number, unit = match.group(1), _SPARK_UNITS[_DURATION_UNITS[match.group(2)]]
    return f"{number} {unit}" + ("" if float(number) == 1 else "s")


@dataclass(frozen=True)
class Trigger:
    """When a streaming query runs its micro-batches.

    ``available-now`` processes the backlog (in as many batches as the read limits ask for)
    and stops; ``once`` processes it in one batch and stops; ``interval`` runs forever,
    starting a batch every ``interval_seconds`` (0 means as soon as the previous ends).
    ``real-time`` runs forever in Spark's Real-time Mode: long-running tasks emit each
    record as it arrives, and ``interval_seconds`` is how often the query checkpoints
    (Spark's minimum is 5 s unless ``spark.sql.streaming.realTimeMode.minBatchDuration``
    says otherwise).
    """

    kind: Literal["available-now", "once", "interval", "real-time"]
    interval_seconds: float = 0.0

    @property
    def terminates(self) -> bool:
        """Whether a query with this trigger stops by itself once the backlog is done."""
        return self.kind in ("available-now", "once")

    @property
    def real_time(self) -> bool:
        """Whether the query runs in Spark's Real-time Mode."""
        return self.kind == "real-time"

    def __str__(self) -> str:
        if self.kind in ("interval", "real-time"):
            return f"{self.kind}={_format_seconds(self.interval_seconds)}"
        return self.kind

    def spark_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``DataStreamWriter.trigger``."""
        if self.kind == "available-now":
            return {"availableNow": True}
        if self.kind == "once":
            return {"once": True}
        if self.kind == "real-time":
            return {"realTime": f"{int(self.interval_seconds * 1000)} milliseconds"}
        return {"processingTime": f"{int(self.interval_seconds * 1000)} milliseconds"}


def _format_seconds(seconds: float) -> str:
    return f"{int(seconds)}s" if seconds == int(seconds) else f"{int(seconds * 1000)}ms"


# How often a real-time query checkpoints when the spec does not say. Each checkpoint
# ends the interval's long-running tasks and starts new ones, and the records arriving in
# that gap (50-100 ms warm) wait for them: at Spark's minimum, 5 s, those gaps make the
# 99th percentile's latency (91 ms at 10,000 events/s, one run of 2026-12-07); at 60 s,
# 12 ms (benchmarks/ysb_latency.py --stateless). What a crash replays is the interval in
# flight: up to a minute of records, re-sent with their keys (Kafka's sink writes at
# least once).
REAL_TIME_CHECKPOINT_SECONDS = 60.0


def parse_trigger(text: str) -> Trigger:
    """Parse ``available-now``, ``once``, ``interval=<duration>`` (e.g. ``interval=10s``)
    or ``real-time[=<checkpoint interval>]`` (e.g. ``real-time=10s``)."""
    normalized = text.strip().lower().replace("_", "-")
    if normalized in ("available-now", "availablenow"):
        return Trigger("available-now")
    if normalized == "once":
        return Trigger("once")
    if normalized.startswith("interval="):
        return Trigger("interval", parse_duration(normalized.split("=", 1)[1]))
    if normalized in ("real-time", "realtime"):
        return Trigger("real-time", REAL_TIME_CHECKPOINT_SECONDS)
    if normalized.startswith(("real-time=", "realtime=")):
        return Trigger("real-time", parse_duration(normalized.split("=", 1)[1]))
    raise ValueError(
        f"invalid trigger {text!r}: use available-now, once, interval=<duration> "
        "(e.g. interval=10s) or real-time[=<checkpoint interval>] (e.g. real-time=10s)"
    )


_CRON_ALIASES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")


def check_schedule(text: str) -> str:
    """``text`` if it is a 5-field cron expression (minute hour day month weekday, in
    UTC) or one of the aliases ``@hourly``, ``@daily``...; else a ValueError saying how."""
    from croniter import croniter  # only specs with a schedule pay for it

    fields = text.split()
    if not (len(fields) == 5 or text in _CRON_ALIASES) or not croniter.is_valid(text):
        raise ValueError(
            f"invalid schedule {text!r}: write a 5-field cron expression "
            '(minute hour day-of-month month day-of-week, in UTC), e.g. "*/15 * * * *", '
            "or @hourly, @daily, @weekly, @monthly"
        )
    return text
