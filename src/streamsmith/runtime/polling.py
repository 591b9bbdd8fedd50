"""Waiting for another query to get somewhere, by asking again until a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(check: Callable[[], T | None], wait_s: float, every_s: float = 0.2) -> T | None:
    """The first answer of ``check`` that is not None, asking every ``every_s`` seconds;
    None when there is none within ``wait_s``. Side queries wait this way for the main
    query of their flow, which runs on its own schedule in the same process or another."""
    deadline = time.monotonic() + wait_s
    while True:
        answer = check()
        if answer is not None or time.monotonic() > deadline:
            return answer
        time.sleep(every_s)
