"""What the benchmark scripts share (run them as scripts: this folder is on their path)."""

from __future__ import annotations

import time
from collections.abc import Callable


def timed(runs: int, action: Callable[[], None]) -> list[float]:
    """Wall seconds of ``runs`` calls of ``action``, in order (the first is the cold one)."""
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        timings.append(time.perf_counter() - started)
    return timings
