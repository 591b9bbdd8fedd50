"""Watching runs: the event log, metrics, service-level alerts, notifications, status."""
