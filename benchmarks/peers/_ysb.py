"""What the peer scripts share: arguments, the campaign lookup, the clock and the report."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

# The librdkafka setting streamsmith's own consumers use (``fetch.queue.backoff.ms``
# defaults to 1000 ms, which left a consumer of the embedded broker idle most of the
# time), given to every peer too, so that no path wins on consumer tuning alone.
CONSUMER_TUNING = {"fetch.queue.backoff.ms": "10"}


@dataclass
class Run:
    """One peer's run: its arguments, and the first and last input it saw."""

    bootstrap: str
    topic: str
    campaigns: dict[str, str]
    events: int
    seen: int = 0
    first: float = 0.0
    last: float = 0.0
    windows: set[tuple[str, int]] = field(default_factory=set)

    @classmethod
    def from_argv(cls) -> Run:
        bootstrap, topic, campaigns, events = sys.argv[1:5]
        with open(campaigns, encoding="utf-8") as file:
            return cls(bootstrap, topic, dict(json.load(file)), int(events))

    def saw(self) -> None:
        """Count one input event (called by the peer's first operator)."""
        now = time.perf_counter()
        if not self.seen:
            self.first = now
        self.seen += 1
        self.last = now

    def touch(self) -> None:
        """Mark work on an event after the input (a re-keyed copy, say) as the last."""
        self.last = time.perf_counter()

    def report(self, name: str) -> None:
        seconds = self.last - self.first
        print(json.dumps({"peer": name, "events": self.seen, "seconds": seconds,
                          "windows": len(self.windows)}))  # fmt: skip


def event_ms(text: str) -> int:
    """``2026-11-20T12:00:00.125Z`` as epoch milliseconds."""
    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)
