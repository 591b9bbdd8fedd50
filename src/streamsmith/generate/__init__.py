"""Synthetic event producers (files or Kafka) with knobs for late, duplicate and corrupt data."""

from __future__ import annotations

from datetime import datetime, timedelta


def check_corruption_and_time(corrupt_fraction: float, start: datetime, span: timedelta) -> None:
    """Validate the arguments every generator shares, naming the argument and the fix."""
    if not 0 <= corrupt_fraction <= 1:
        raise ValueError(
            f"corrupt_fraction must be between 0 and 1, got {corrupt_fraction!r}: "
            "use 0 for clean data or e.g. 0.05 for a little corruption"
        )
    if start.tzinfo is None or start.utcoffset() is None:
        raise ValueError(
            f"start must be timezone-aware, got naive {start.isoformat()}: "
            "pass e.g. datetime(2026, 11, 20, tzinfo=UTC)"
        )
    if span <= timedelta(0):
        raise ValueError(f"span must be positive, got {span!r}: pass e.g. timedelta(hours=6)")
