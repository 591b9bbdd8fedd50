"""Builds and runs an app's flows: streaming queries, scheduled catch-up runs, backfills."""
