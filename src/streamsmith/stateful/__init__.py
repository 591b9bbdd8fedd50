"""Stateful processors for ``transformWithStateInPandas``: arbitrary per-key state with
event-time timers, on the RocksDB state store."""

from __future__ import annotations

import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle


def move_timer(handle: StatefulProcessorHandle, at_ms: int | None) -> None:
    """Keep at most one event-time timer per key: drop the key's timers, then register
    one at ``at_ms`` (none when it is None)."""
    for timer in handle.listTimers():
        handle.deleteTimer(timer)
    if at_ms is not None:
        handle.registerTimer(at_ms)


def millis(times: pd.Series) -> pd.Series:
    """Timestamps (as Spark hands them to a processor) in epoch milliseconds."""
    return pd.to_datetime(times, utc=True).astype("int64") // 1_000_000


def timestamps(values: list[int]) -> pd.Series:
    """Epoch milliseconds as a UTC timestamp column, typed even when empty (Arrow needs
    the type to build the output batch)."""
    return pd.Series(pd.to_datetime(values, unit="ms", utc=True), dtype="datetime64[ns, UTC]")
