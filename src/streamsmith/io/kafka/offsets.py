"""Kafka offset arithmetic: parsing offset specs, admission control, splitting ranges.

Pure functions over ``{(topic, partition): offset}`` maps, so the rules that decide what a
micro-batch reads are unit-tested without a broker. Offsets are serialized the way
Spark's own Kafka source writes them, ``{"topic": {"0": 42, "1": 17}}``, so checkpoints
read like Spark's and users can paste them into ``startingOffsets``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]

# Spark's sentinels inside a per-partition JSON spec.
EARLIEST = -2
LATEST = -1


class OffsetSpecError(ValueError):
    """An offsets option that cannot be understood; the message names the option."""


@dataclass(frozen=True)
class OffsetRange:
    """Records ``[start, end)`` of one topic-partition: what a Spark task reads (or part of it)."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def to_json_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{(t, p): o}`` -> ``{"t": {"p": o}}`` with partitions in numeric order."""
    result: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = int(offset)
    return result


def json_within(
    end: Mapping[str, Mapping[str, int]], limit: Mapping[str, Mapping[str, int]]
) -> bool:
    """Whether every partition of ``end`` is in ``limit`` at no greater offset (both in
    Spark's JSON form)."""
    return all(
        partition in limit.get(topic, {}) and offset <= limit[topic][partition]
        for topic, partitions in end.items()
        for partition, offset in partitions.items()
    )


def from_json_dict(document: Mapping[str, Mapping[str, int]]) -> Offsets:
    """``{"t": {"p": o}}`` -> ``{(t, p): o}``."""
    return {
        (topic, int(partition)): int(offset)
        for topic, partitions in document.items()
        for partition, offset in partitions.items()
    }


def parse_offset_spec(option: str, text: str, *, allow_latest: bool = True) -> str | Offsets:
    """``earliest``, ``latest`` or a per-partition JSON object (-2 earliest, -1 latest)."""
    value = text.strip()
    if value.lower() in ("earliest", "latest"):
        if value.lower() == "latest" and not allow_latest:
            raise OffsetSpecError(f"{option}=latest is not allowed here; use earliest or JSON")
        return value.lower()
    try:
        document = json.loads(value)
        offsets = from_json_dict(document)
    except (ValueError, TypeError, AttributeError) as exc:
        raise OffsetSpecError(
            f"{option}={text!r} is not earliest, latest or JSON like "
            '{"topic": {"0": 23, "1": -2}} (-2 = earliest, -1 = latest)'
        ) from exc
    for (topic, partition), offset in offsets.items():
        if offset < LATEST - 1:
            raise OffsetSpecError(f"{option}: offset {offset} of {topic}-{partition} is negative")
    return offsets


def resolve(
    spec: str | Offsets,
    partitions: Iterable[TopicPartition],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    *,
    default: str = "earliest",
) -> Offsets:
    """Concrete offsets for ``partitions`` from a spec; unlisted partitions use ``default``."""
    resolved: Offsets = {}
    for tp in partitions:
        if isinstance(spec, str):
            choice: int | str = spec
        else:
            choice = spec.get(tp, default)
        if choice in ("earliest", EARLIEST):
            resolved[tp] = earliest[tp]
        elif choice in ("latest", LATEST):
            resolved[tp] = latest[tp]
        else:
            resolved[tp] = int(choice)
    return resolved


def cap_by_rows(start: Mapping[TopicPartition, int], end: Offsets, max_rows: int) -> Offsets:
    """Limit a batch to ``max_rows`` records, shared across partitions in proportion to lag.

    Every partition keeps moving (a share is rounded down, and the leftover rows go to
    the partitions with the largest remainders), and the total is exactly ``max_rows``
    whenever more than that is available.
    """
    lags = {tp: max(0, end[tp] - start.get(tp, end[tp])) for tp in end}
    total = sum(lags.values())
    if total <= max_rows:
        return dict(end)
    shares = {tp: max_rows * lag / total for tp, lag in lags.items()}
    granted = {tp: int(share) for tp, share in shares.items()}
    leftover = max_rows - sum(granted.values())
    by_remainder = sorted(lags, key=lambda tp: (granted[tp] - shares[tp], tp))
    for tp in by_remainder[:leftover]:
        granted[tp] += 1
    return {tp: start.get(tp, end[tp]) + granted[tp] for tp in end}


def split_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    max_records_per_range: int | None = None,
) -> list[OffsetRange]:
    """One range per partition with data, cut into pieces of at most ``max_records_per_range``."""
    ranges = []
    for (topic, partition), stop in sorted(end.items()):
        begin = start.get((topic, partition), stop)
        step = max_records_per_range or max(stop - begin, 1)
        for piece in range(begin, stop, step):
            ranges.append(OffsetRange(topic, partition, piece, min(piece + step, stop)))
    return ranges


def spread_ranges(
    ranges: list[OffsetRange], min_partitions: int | None, min_records: int = 0
) -> list[OffsetRange]:
    """Cut ``ranges`` into at least about ``min_partitions`` pieces, each range into a
    number of pieces in proportion to its size (Spark's ``minPartitions``), but no piece
    smaller than about ``min_records``: one task per topic-partition leaves cores idle
    when there are fewer partitions than cores, or a number that does not divide evenly
    among them, while tiny pieces cost more in task overhead than they save."""
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = _records(ranges)
    if total <= 0:
        return ranges
    ideal = max(total / min_partitions, min_records, 1)
    spread = []
    for whole in ranges:
        parts = min(max(round(whole.size / ideal), 1), max(whole.size, 1))
        for index in range(parts):
            first = whole.start + whole.size * index // parts
            last = whole.start + whole.size * (index + 1) // parts
            spread.append(OffsetRange(whole.topic, whole.partition, first, last))
    return spread


def plan_tasks(
    ranges: list[OffsetRange],
    min_partitions: int | None,
    min_records: int = 0,
    max_packed: int | None = None,
) -> list[tuple[OffsetRange, ...]]:
    """The ranges each Spark task reads: ranges of at least ``min_records`` records
    spread as :func:`spread_ranges` does; smaller ones packed together into as few tasks
    as hold about ``min_records`` each, balanced by size, and at most ``max_packed``.

    Every task pays a fixed cost (a Python worker's turn, a consumer, an Arrow batch)
    that dwarfs reading a few thousand records: an always-on batch of 10,000 records on
    a 3-partition topic read them in two waves of tasks on 2 cores. ``max_packed`` (the
    cores) keeps a larger batch of small ranges spread over the executors. A task reads
    its ranges in order, so each partition is still read in offset order.
    """
    large = [piece for piece in ranges if piece.size >= min_records]
    small = [piece for piece in ranges if piece.size < min_records]
    tasks: list[tuple[OffsetRange, ...]] = [
        (piece,) for piece in spread_ranges(large, min_partitions, min_records)
    ]
    if not small:
        return tasks
    count = min(len(small), -(-_records(small) // min_records), max_packed or len(small))
    groups: list[list[OffsetRange]] = [[] for _ in range(count)]
    for piece in sorted(small, key=lambda piece: -piece.size):
        min(groups, key=_records).append(piece)
    in_order = (sorted(group, key=lambda r: (r.topic, r.partition, r.start)) for group in groups)
    return tasks + [tuple(group) for group in in_order]


def _records(ranges: list[OffsetRange]) -> int:
    return sum(piece.size for piece in ranges)
