"""Waiting in tests for an always-on run to get somewhere (it has no end to wait for)."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(
    condition: Callable[[], bool], what: str, timeout_s: float = 120, every_s: float = 0.2
) -> None:
    """Ask ``condition`` every ``every_s`` until it holds; fail naming ``what`` if it does
    not within ``timeout_s``. Conditions that run a Spark job ask less often: each one
    takes the cores from the run it waits for."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout_s:.0f} s for {what}"
        time.sleep(every_s)
