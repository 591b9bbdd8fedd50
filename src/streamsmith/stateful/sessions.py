"""Activity sessions per user: the seeds' ``mapGroupsWithState`` example, the PySpark 4 way.

The seed tracks, per user, when the current activity started and when it was last seen.
Here that is a session: consecutive readings of one activity with no gap longer than
``gap``. A session closes when a later reading shows another activity or comes after
the gap, or when the watermark passes its last reading plus the gap (an event-time
timer). Closed sessions are emitted once (append mode) and their state is cleared, so
state holds one open session per active user.

A reading older than the open session's last reading but of another activity came too
late to change the past; it is counted in the session's ``stale`` readings, not dropped
silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import (
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from streamsmith.stateful import millis, move_timer, timestamps

SESSION_STATE = StructType(
    [
        StructField("activity", StringType()),
        StructField("start_ms", LongType()),
        StructField("end_ms", LongType()),
        StructField("readings", LongType()),
        StructField("stale", LongType()),
    ]
)

SESSION_OUTPUT = StructType(
    [
        StructField("User", StringType()),
        StructField("activity", StringType()),
        StructField("start", TimestampType()),
        StructField("end", TimestampType()),
        StructField("readings", LongType()),
        StructField("stale", LongType()),
    ]
)

Session = tuple[str, int, int, int, int]  # activity, start_ms, end_ms, readings, stale


def advance(
    session: Session | None, activity: str, at_ms: int, gap_ms: int
) -> tuple[Session, Session | None]:
    """The open session after one reading, and the session it closed (if any)."""
    if session is None:
        return (activity, at_ms, at_ms, 1, 0), None
    current, start, end, readings, stale = session
    if activity == current and at_ms - end <= gap_ms and at_ms - start >= -gap_ms:
        return (current, min(start, at_ms), max(end, at_ms), readings + 1, stale), None
    if at_ms > end:
        return (activity, at_ms, at_ms, 1, 0), session
    return (current, start, end, readings, stale + 1), None


class ActivitySessions(StatefulProcessor):
    """Sessions of one activity per user, closed by a change, a gap, or the watermark."""

    def __init__(
        self, gap_ms: int, time_column: str = "event_time", close_at_end: bool = False
    ) -> None:
        """``close_at_end``: a batch job has no timers; its input is all there is, so
        every session closes after its rows (what the stream does once its watermark
        passes them)."""
        self.gap_ms = gap_ms
        self.time_column = time_column
        self.close_at_end = close_at_end

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.session = handle.getValueState("session", SESSION_STATE)

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        readings = pd.concat(list(rows), ignore_index=True)
        readings = readings.assign(_ms=millis(readings[self.time_column])).sort_values("_ms")
        stored = self.session.get() if self.session.exists() else None
        session: Session | None = tuple(stored) if stored is not None else None
        closed: list[Session] = []
        for activity, at_ms in zip(readings["gt"], readings["_ms"], strict=True):
            session, ended = advance(session, str(activity), int(at_ms), self.gap_ms)
            if ended is not None:
                closed.append(ended)
        assert session is not None
        if self.close_at_end:
            yield _frame(key[0], [*closed, session])
            return
        move_timer(self.handle, session[2] + self.gap_ms)
        self.session.update(session)
        yield _frame(key[0], closed)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        stored = self.session.get() if self.session.exists() else None
        self.session.clear()
        yield _frame(key[0], [tuple(stored)] if stored is not None else [])

    def close(self) -> None:
        return


def _frame(user: str, sessions: list[Session]) -> pd.DataFrame:
    """Sessions as rows of ``SESSION_OUTPUT``; typed even when empty (Arrow needs it)."""

    return pd.DataFrame(
        {
            "User": pd.Series([user] * len(sessions), dtype=object),
            "activity": pd.Series([s[0] for s in sessions], dtype=object),
            "start": timestamps([s[1] for s in sessions]),
            "end": timestamps([s[2] for s in sessions]),
            "readings": pd.Series([s[3] for s in sessions], dtype="int64"),
            "stale": pd.Series([s[4] for s in sessions], dtype="int64"),
        }
    )
