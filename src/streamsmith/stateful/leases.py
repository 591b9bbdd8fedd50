"""DHCP lease tracking (the slides' "tracking DHCP sessions"): per IP, who holds it.

State per IP is the current lease: the device (MAC, hostname), when it started, and
when it ends unless renewed. A renewal by the holder extends it; a release ends it; an
assignment to another device, or any event after the end, closes it and opens a new
one. An event-time timer at the lease's end closes it when no renewal came, and clears
the state, so state holds one row per IP with a live lease. Each closed lease is emitted
once, with why it ended: ``released``, ``expired`` or ``reassigned``.
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
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from streamsmith.stateful import millis, move_timer, timestamps

LEASE_STATE = StructType(
    [
        StructField("mac", StringType()),
        StructField("hostname", StringType()),
        StructField("start_ms", LongType()),
        StructField("end_ms", LongType()),
    ]
)

LEASE_OUTPUT = StructType(
    [
        StructField("ip", StringType()),
        StructField("mac", StringType()),
        StructField("hostname", StringType()),
        StructField("lease_start", TimestampType()),
        StructField("lease_end", TimestampType()),
        StructField("ended_by", StringType()),
    ]
)

Lease = tuple[str, str, int, int]  # mac, hostname, start_ms, end_ms
Closed = tuple[Lease, str]  # a lease and why it ended


def track(
    lease: Lease | None, events: list[tuple[int, str, str, str, int]]
) -> tuple[Lease | None, list[Closed]]:
    """Apply DHCP events ``(at_ms, action, mac, hostname, lease_seconds)`` in time order:
    the lease afterwards (None when released), and the leases they closed."""
    closed: list[Closed] = []
    for at_ms, action, mac, hostname, seconds in sorted(events):
        if lease is not None and at_ms >= lease[3]:
            closed.append(((lease[0], lease[1], lease[2], lease[3]), "expired"))
            lease = None
        if action == "release":
            if lease is not None and lease[0] == mac:
                closed.append(((lease[0], lease[1], lease[2], at_ms), "released"))
                lease = None
            continue
        end = at_ms + seconds * 1000
        if lease is not None and lease[0] == mac:
            lease = (mac, hostname, lease[2], max(lease[3], end))
            continue
        if lease is not None:
            closed.append(((lease[0], lease[1], lease[2], at_ms), "reassigned"))
        lease = (mac, hostname, at_ms, end)
    return lease, closed


class LeaseTracker(StatefulProcessor):
    """Leases per IP (grouping key ``ip``); input rows are DHCP events with
    ``event_time, action, mac, hostname, lease_seconds``.

    A batch job has no timers (``close_at_end``): it closes, as expired, the leases that
    end by ``horizon`` (a column: the time up to which its input is complete), which is
    what the stream's timers do once the watermark reaches that time.
    """

    def __init__(self, close_at_end: bool = False) -> None:
        self.close_at_end = close_at_end

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.lease = handle.getValueState("lease", LEASE_STATE)

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        frame = pd.concat(list(rows), ignore_index=True)
        times = millis(frame["event_time"])
        events = list(
            zip(
                times.tolist(),
                frame["action"].astype(str),
                frame["mac"].astype(str),
                frame["hostname"].astype(str),
                frame["lease_seconds"].fillna(0).astype("int64").tolist(),
                strict=True,
            )
        )
        stored = self.lease.get() if self.lease.exists() else None
        before: Lease | None = (
            (str(stored[0]), str(stored[1]), int(stored[2]), int(stored[3])) if stored else None
        )
        lease, closed = track(before, events)
        ip = str(key[0])
        if self.close_at_end:
            horizon = millis(frame["horizon"])
            if lease is not None and lease[3] <= int(horizon.max()):
                closed.append((lease, "expired"))
            yield _frame(ip, closed)
            return
        if lease is None:
            self.lease.clear()
        else:
            self.lease.update(lease)
        move_timer(self.handle, lease[3] if lease is not None else None)
        yield _frame(ip, closed)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        stored = self.lease.get() if self.lease.exists() else None
        self.lease.clear()
        if stored is None:
            yield _frame(str(key[0]), [])
            return
        lease = (str(stored[0]), str(stored[1]), int(stored[2]), int(stored[3]))
        yield _frame(str(key[0]), [(lease, "expired")])

    def close(self) -> None:
        return


def _frame(ip: str, closed: list[Closed]) -> pd.DataFrame:
    """Closed leases as rows of ``LEASE_OUTPUT``; typed even when empty."""

    return pd.DataFrame(
        {
            "ip": pd.Series([ip] * len(closed), dtype=object),
            "mac": pd.Series([lease[0] for lease, _ in closed], dtype=object),
            "hostname": pd.Series([lease[1] for lease, _ in closed], dtype=object),
            "lease_start": timestamps([lease[2] for lease, _ in closed]),
            "lease_end": timestamps([lease[3] for lease, _ in closed]),
            "ended_by": pd.Series([why for _, why in closed], dtype=object),
        }
    )
