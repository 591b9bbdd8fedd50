"""Adaptive batch sizing: wide micro-batches to catch up, narrow ones once caught up.

A fixed read limit is a compromise: small batches keep each batch short but make a
backlog (after an outage, or at first start) take many batches, each paying the fixed
per-batch cost; large ones catch up fast but admit a huge batch whenever the source
falls behind. :class:`AdaptiveLimit` moves between a floor and a cap instead: while the
backlog is larger than the current limit, the limit grows fourfold (up to the cap) at
every batch; once a batch takes everything available, it halves back towards the floor.
The state lives in the source's reader, so it adapts without restarting the query; a
restarted query starts again from the floor and reaches the cap within log4(cap/floor)
batches (3 with the default floor of 1/64 of the cap).
"""

from __future__ import annotations

from dataclasses import dataclass, field

GROWTH = 4  # per batch while behind; measured in benchmarks/adaptive_batches.py


@dataclass
class AdaptiveLimit:
    """The admission limit of one source, between ``floor`` and ``cap`` rows."""

    floor: int
    cap: int
    current: int = field(default=0)

    def __post_init__(self) -> None:
        if not 0 < self.floor <= self.cap:
            raise ValueError(f"adaptive batch floor {self.floor} must be in 1..{self.cap}")
        self.current = self.current or self.floor

    def admit(self, backlog: int) -> int:
        """Rows to admit into this batch out of ``backlog`` available; adapts the limit."""
        admitted = min(backlog, self.current)
        if backlog > self.current:
            self.current = min(self.cap, self.current * GROWTH)
        else:
            self.current = max(self.floor, self.current // 2)
        return admitted


@dataclass(frozen=True)
class FileLimits:
    """Adaptive ``maxFilesPerTrigger`` for a file source, between ``floor`` and ``cap``.

    Spark's file source reads its limit once, when the query starts, so a change means
    restarting the query between batches (a second or two). The limit therefore switches
    only on a clear change: to the cap when the backlog exceeds it, back to the floor
    once the backlog fits in one floor-sized batch.
    """

    floor: int
    cap: int

    def choose(self, backlog_files: int, current: int | None) -> int:
        """The limit to run with for this backlog (``current`` is None at the start)."""
        if current is None:
            return self.cap if backlog_files > self.floor else self.floor
        if current == self.cap and backlog_files <= self.floor:
            return self.floor
        if current != self.cap and backlog_files > self.cap:
            return self.cap
        return current
