"""streamsmith: continuous applications on Apache Spark Structured Streaming.

Business logic is written once as DataFrame transformations; streamsmith runs it as an
always-on stream, a scheduled catch-up (``availableNow``) or a batch backfill, with
exactly-once output and quarantine for bad records.

The public API, for a pipeline's own code (see :mod:`streamsmith.api`)::

    import streamsmith as ss

    pipeline = ss.Pipeline("orders", sources={...})

    @pipeline.flow(source="orders", sink={...}, event_time=ss.EventTime("ts", "10 minutes"))
    def order_totals(orders): ...

Its names load on first use, so the command line does not pay for PySpark until needed.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from streamsmith.api import EventTime, Expect, Pipeline, Stream, flow
    from streamsmith.io.sinks.base import Sink

_PUBLIC = {
    "EventTime": "streamsmith.api",
    "Expect": "streamsmith.api",
    "Pipeline": "streamsmith.api",
    "Stream": "streamsmith.api",
    "flow": "streamsmith.api",
    "Sink": "streamsmith.io.sinks.base",
}

__all__ = ["EventTime", "Expect", "Pipeline", "Sink", "Stream", "__version__", "flow"]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'streamsmith' has no attribute {name!r}")
