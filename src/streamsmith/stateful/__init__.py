"""Stateful processors for ``transformWithStateInPandas``: arbitrary per-key state with
event-time timers, on the RocksDB state store."""
