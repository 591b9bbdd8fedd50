"""Stateful processors for ``transformWithStateInPandas``: arbitrary per-key state with
event-time timers, on the RocksDB state store."""

from __future__ import annotations

from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle


def move_timer(handle: StatefulProcessorHandle, at_ms: int | None) -> None:
    """Keep at most one event-time timer per key: drop the key's timers, then register
    one at ``at_ms`` (none when it is None)."""
    for timer in handle.listTimers():
        handle.deleteTimer(timer)
    if at_ms is not None:
        handle.registerTimer(at_ms)
