"""streamsmith: continuous applications on Apache Spark Structured Streaming.

Business logic is written once as DataFrame transformations; streamsmith runs it as an
always-on stream, a scheduled catch-up (``availableNow``) or a batch backfill, with
exactly-once output and quarantine for bad records.
"""

from __future__ import annotations

__version__ = "0.1.0"
