"""What the benchmark scripts share (run them as scripts: this folder is on their path)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping


def timed(runs: int, action: Callable[[], None]) -> list[float]:
    """Wall seconds of ``runs`` calls of ``action``, in order (the first is the cold one)."""
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        timings.append(time.perf_counter() - started)
    return timings


def timed_rounds(runs: int, actions: Mapping[str, Callable[[], None]]) -> dict[str, list[float]]:
    """Wall seconds of each action, ``runs`` rounds of one call each, in order.

    Round-robin rather than one action's runs back to back: the JVM keeps compiling hot
    code for minutes, so paths measured later in a run would otherwise look faster.
    """
    timings: dict[str, list[float]] = {name: [] for name in actions}
    for _ in range(runs):
        for name, action in actions.items():
            started = time.perf_counter()
            action()
            timings[name].append(time.perf_counter() - started)
    return timings
