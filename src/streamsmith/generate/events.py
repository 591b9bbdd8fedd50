"""Event-time test data: chunks of JSON lines with out-of-order, late, too-late,
duplicate and corrupt events, each labelled with what a correct pipeline does with it.

Input is delivered in *chunks* (one file, or one burst of Kafka messages); a stream that
runs one micro-batch per chunk sees Spark's watermark move exactly as :func:`simulate`
computes it: the watermark of chunk k is the largest event time in chunks before k minus
the delay, and an event loses each of its windows that ends at or before it (without
windows, the event is dropped when its own time is at or before it).

The knobs say what to *try*: move a group of events to a later chunk (``late``), much
later (``too_late``), shuffle it inside its chunk (``out_of_order``), re-send it
(``duplicates``) or garble it (``corrupt``). The labels come from replaying the
watermark over the chunks as delivered, so they are exact whatever the knobs did:
``on_time``, ``out_of_order`` (behind an earlier event of its own chunk), ``late``
(behind an earlier chunk, yet counted in every window), ``partly_late`` (some of its
sliding windows closed), ``too_late`` (every window closed), ``duplicate`` and
``corrupt``. Same seed, same bytes.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from streamsmith.generate import check_corruption_and_time, produce_all

Record = dict[str, Any]
# One group of events that move together, in order (a phone's open and close).
Group = list[tuple[datetime, Record]]
GroupFactory = Callable[[random.Random, datetime, int], Group]
TimeFormat = Callable[[datetime], Any]

LABELS = ("on_time", "out_of_order", "late", "partly_late", "too_late", "duplicate", "corrupt")


@dataclass(frozen=True)
class Rule:
    """The watermark delay and windows of the stateful operator the data is made for."""

    delay: timedelta
    window: timedelta | None = None
    slide: timedelta | None = None

    def windows(self, moment: datetime) -> list[tuple[datetime, datetime]]:
        """The ``[start, end)`` windows containing ``moment`` (starts at multiples of the
        slide from the epoch, as Spark's ``window`` does)."""
        if self.window is None:
            return []
        size = self.window.total_seconds()
        step = (self.slide or self.window).total_seconds()
        last = (moment.timestamp() // step) * step
        starts = [last - i * step for i in range(int(size // step))]
        return [
            (datetime.fromtimestamp(s, UTC), datetime.fromtimestamp(s + size, UTC))
            for s in sorted(starts)
        ]


@dataclass(frozen=True)
class Knobs:
    """Fractions of event groups to disturb; each between 0 and 1."""

    out_of_order: float = 0.1
    late: float = 0.05
    too_late: float = 0.02
    duplicates: float = 0.0
    corrupt: float = 0.0

    def check(self) -> None:
        for name in ("out_of_order", "late", "too_late", "duplicates", "corrupt"):
            value = getattr(self, name)
            if not 0 <= value <= 1:
                raise ValueError(f"{name} must be between 0 and 1, got {value!r}")


@dataclass(frozen=True)
class Delivered:
    """One delivered line: its chunk, its label, and the event (None when corrupt)."""

    chunk: int
    line: bytes
    label: str
    time: datetime | None = None
    record: Record | None = None
    key: str = ""
    windows_counted: tuple[tuple[datetime, datetime], ...] = ()


@dataclass(frozen=True)
class EventData:
    """Generated chunks in delivery order, every line labelled."""

    rule: Rule
    delivered: tuple[Delivered, ...]
    chunk_count: int
    label_counts: Counter[str] = field(default_factory=Counter)

    @property
    def chunks(self) -> list[list[bytes]]:
        grouped: list[list[bytes]] = [[] for _ in range(self.chunk_count)]
        for item in self.delivered:
            grouped[item.chunk].append(item.line)
        return grouped

    @property
    def lines(self) -> list[bytes]:
        return [item.line for item in self.delivered]

    def counted(self, *, dedup: bool = False) -> Iterator[Delivered]:
        """Events a correct stateful flow counts (in at least one of their windows).

        Re-sent events count again unless the flow deduplicates (``dedup``).
        """
        dropped = ("too_late", "duplicate") if dedup else ("too_late",)
        for item in self.delivered:
            if item.record is not None and item.label not in dropped:
                yield item


def generate_events(
    factory: GroupFactory,
    rule: Rule,
    *,
    groups: int,
    chunks: int,
    seed: int,
    knobs: Knobs,
    start: datetime,
    span: timedelta,
    time_format: TimeFormat,
    key_field: str,
    time_field: str,
    corrupt_lines: Sequence[Callable[[Record], str]],
) -> EventData:
    """Make ``groups`` event groups over ``span``, deliver them in ``chunks`` with the
    knobs applied, and label every line by replaying the watermark."""
    knobs.check()
    check_corruption_and_time(knobs.corrupt, start, span)
    if groups < 1 or chunks < 1:
        raise ValueError(f"groups and chunks must be at least 1, got {groups} and {chunks}")
    rng = random.Random(seed)
    corrupt_rng = random.Random(seed ^ 0x5EED)
    step = span / groups
    made = [factory(rng, start + step * i + step * rng.random() * 0.5, i) for i in range(groups)]
    per_chunk = max(1, -(-groups // chunks))
    plan: list[list[Group]] = [[] for _ in range(chunks)]
    for index, group in enumerate(made):
        home = min(index // per_chunk, chunks - 1)
        draw = rng.random()
        if draw < knobs.too_late:
            target = _too_late_chunk(rule, plan, made, per_chunk, group, home)
        elif draw < knobs.too_late + knobs.late:
            target = _late_chunk(rule, made, per_chunk, group, home, chunks)
        else:
            target = home
        plan[target].append(group)
        if rng.random() < knobs.duplicates:
            plan[target].append(group)  # re-sent soon: dedup, not the watermark, drops it
    for chunk in plan:
        for position in range(1, len(chunk)):
            if rng.random() < knobs.out_of_order:  # a neighbour swap: one event arrives late
                chunk[position - 1], chunk[position] = chunk[position], chunk[position - 1]
    return _label(rule, plan, knobs, corrupt_rng, time_format, key_field, time_field, corrupt_lines)


def _late_chunk(
    rule: Rule, made: list[Group], per_chunk: int, group: Group, home: int, chunks: int
) -> int:
    """The next chunk, when the group is recent enough for the watermark to keep it there
    (within 80% of the delay of its chunk's newest event); else its own chunk."""
    if home + 1 >= chunks:
        return home
    newest = max(moment for g in made[home * per_chunk : (home + 1) * per_chunk] for moment, _ in g)
    oldest = min(moment for moment, _ in group)
    return home + 1 if newest - oldest < rule.delay * 0.8 else home


def _too_late_chunk(
    rule: Rule, plan: list[list[Group]], made: list[Group], per_chunk: int, group: Group, home: int
) -> int:
    """The first chunk by whose start every window of the group has closed, if any."""
    latest = max(moment for moment, _ in group)
    closes = max((end for _, end in rule.windows(latest)), default=latest)
    for chunk in range(home + 1, len(plan)):
        seen = [m for g in made[: chunk * per_chunk] for m, _ in g]
        if seen and max(seen) - rule.delay >= closes + timedelta(seconds=1):
            return chunk
    return home


def _label(
    rule: Rule,
    plan: list[list[Group]],
    knobs: Knobs,
    corrupt_rng: random.Random,
    time_format: TimeFormat,
    key_field: str,
    time_field: str,
    corrupt_lines: Sequence[Callable[[Record], str]],
) -> EventData:
    delivered: list[Delivered] = []
    seen_before: datetime | None = None  # the largest event time of earlier chunks
    sent: set[str] = set()
    for number, chunk in enumerate(plan):
        watermark = seen_before - rule.delay if seen_before else None
        chunk_max: datetime | None = None
        for group in chunk:
            # A group is garbled whole: a phone's close never survives its lost open.
            garbled = corrupt_rng.random() < knobs.corrupt
            for moment, record in group:
                payload = {**record, time_field: time_format(moment)}
                line = json.dumps(payload, sort_keys=False)
                if garbled:
                    bad = corrupt_lines[corrupt_rng.randrange(len(corrupt_lines))](payload)
                    delivered.append(Delivered(number, bad.encode(), "corrupt"))
                    continue
                label, counted = _fate(rule, moment, watermark, seen_before, chunk_max)
                if line in sent and label != "too_late":
                    label = "duplicate"
                sent.add(line)
                chunk_max = max(chunk_max or moment, moment)
                delivered.append(
                    Delivered(
                        number,
                        line.encode(),
                        label,
                        moment,
                        payload,
                        str(record[key_field]),
                        tuple(counted),
                    )
                )
        if chunk_max is not None:
            seen_before = max(seen_before or chunk_max, chunk_max)
    counts = Counter(item.label for item in delivered)
    return EventData(rule, tuple(delivered), len(plan), counts)


def _fate(
    rule: Rule,
    moment: datetime,
    watermark: datetime | None,
    seen_before: datetime | None,
    chunk_max: datetime | None,
) -> tuple[str, list[tuple[datetime, datetime]]]:
    """The label of an event and the windows it is counted in."""
    windows = rule.windows(moment)
    counted = windows
    if watermark is not None:
        if rule.window is None and moment <= watermark:
            return "too_late", []
        counted = [w for w in windows if w[1] > watermark]
        if windows and not counted:
            return "too_late", []
        if len(counted) < len(windows):
            return "partly_late", counted
    if seen_before is not None and moment < seen_before:
        return "late", counted
    if chunk_max is not None and moment < chunk_max:
        return "out_of_order", counted
    return "on_time", counted


def write_chunks(data: EventData, directory: Path, prefix: str) -> list[Path]:
    """One JSON-lines file per chunk, in delivery order (see :func:`write_line_chunks`)."""
    return write_line_chunks(data.chunks, directory, prefix)


def write_line_chunks(
    chunks: Sequence[Sequence[bytes]], directory: Path, prefix: str, first_number: int = 0
) -> list[Path]:
    """One JSON-lines file per chunk, named and timestamped in delivery order, written
    atomically (a dot file renamed into place: Spark's file source ignores dot files).
    ``first_number`` numbers the files of a later delivery after the earlier ones."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    first = time.time()
    for number, lines in enumerate(chunks, start=first_number):
        target = directory / f"{prefix}-{number:05d}.json"
        staging = directory / f".{target.name}.tmp"
        staging.write_bytes(b"".join(line + b"\n" for line in lines))
        # Spark's file source takes files in modification-time order; files written within
        # one clock tick would tie, so give each chunk its own second, in delivery order.
        moment = first + number - first_number
        os.utime(staging, (moment, moment))
        staging.replace(target)
        written.append(target)
    return written


def publish_chunks(data: EventData, bootstrap: str, topic: str) -> int:
    """Produce every line, chunk after chunk, keyed by the event's key; raises on any
    delivery failure. Returns the number of messages."""
    keys = [item.key.encode() if item.key else None for item in data.delivered]
    return produce_all(bootstrap, topic, data.lines, keys)


def utc_text(moment: datetime) -> str:
    """ISO-8601 UTC with milliseconds, e.g. ``2026-11-20T10:04:31.250Z``."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
