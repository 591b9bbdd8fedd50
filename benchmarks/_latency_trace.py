"""Where the slow records of a Kafka -> Kafka latency run waited: a trace of each record.

Each record has three clock readings on this machine: ``sent`` (the producer stamped it),
``read`` (the broker appended it to the input topic, ``LogAppendTime``) and ``out`` (the
broker appended the flow's output record). ``read - sent`` is the producer's batching and
the broker's append; ``out - read`` is the flow: the consumer's fetch, the processing,
the flow's producer and the broker's append of its output.

The slow records (over the run's p99) are grouped into episodes: records sent within
``gap_ms`` of one another belong to one episode. Periodic stalls show as episodes at a
steady spacing; their phase within the flow's batches (a real-time batch lasts its
checkpoint interval) says whether the batch boundaries cause them.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Traced:
    sent: int  # epoch ms, the producer's stamp
    read: int | None  # epoch ms, appended to the input topic (None: the flow did not say)
    out: int  # epoch ms, appended to the output topic


@dataclass(frozen=True)
class Episode:
    first_sent: int
    last_sent: int
    records: int
    worst_ms: int


def percentile(sorted_values: Sequence[float], p: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(p * len(sorted_values)))]


def episodes(records: Sequence[Traced], threshold_ms: float, gap_ms: int = 50) -> list[Episode]:
    """Runs of records slower than ``threshold_ms``, split where ``gap_ms`` passes
    between two slow records' send times."""
    slow = sorted((r for r in records if r.out - r.sent > threshold_ms), key=lambda r: r.sent)
    found: list[Episode] = []
    for record in slow:
        wait = record.out - record.sent
        last = found[-1] if found else None
        if last is not None and record.sent - last.last_sent <= gap_ms:
            found[-1] = Episode(last.first_sent, record.sent, last.records + 1,
                                max(last.worst_ms, wait))  # fmt: skip
        else:
            found.append(Episode(record.sent, record.sent, 1, wait))
    return found


def print_trace(records: Sequence[Traced], batch_starts: Sequence[int], gc_ms: float) -> None:
    """Print the split of the latency, the episodes of slow records and their phase in
    the batches that started at ``batch_starts`` (epoch ms)."""
    if not records:
        return
    total = sorted(float(r.out - r.sent) for r in records)
    p99 = percentile(total, 0.99)
    split = [r for r in records if r.read is not None]
    if split:
        to_input = sorted(float(r.read - r.sent) for r in split if r.read is not None)
        flow = sorted(float(r.out - r.read) for r in split if r.read is not None)
        for name, values in (("producer -> input", to_input), ("flow (input -> output)", flow)):
            print(f"    {name:<24} p50 {statistics.median(values):>6,.0f} ms  "
                  f"p99 {percentile(values, 0.99):>6,.0f} ms  "
                  f"max {values[-1]:>6,.0f} ms")  # fmt: skip
        slow = [(r.read - r.sent, r.out - r.read) for r in split
                if r.read is not None and r.out - r.sent > p99]  # fmt: skip
        if slow:
            in_flow = sum(1 for before, flowing in slow if flowing > before)
            print(f"    of the {len(slow):,} records over p99, "
                  f"{in_flow:,} waited mostly in the flow")  # fmt: skip
    found = episodes(records, p99)
    span_s = (records[-1].sent - records[0].sent) / 1000 if len(records) > 1 else 0.0
    print(f"    {len(found)} episodes over p99 ({p99:,.0f} ms) in {span_s:,.0f} s; "
          f"JVM garbage collection {gc_ms:,.0f} ms in all")  # fmt: skip
    if len(found) > 1:
        gaps = [b.first_sent - a.first_sent for a, b in itertools.pairwise(found)]
        lengths = [e.last_sent - e.first_sent for e in found]
        print(f"    spacing median {statistics.median(gaps):,.0f} ms, "
              f"episode length median {statistics.median(lengths):,.0f} ms, "
              f"worst {max(e.worst_ms for e in found):,} ms")  # fmt: skip
    starts = sorted(batch_starts)
    if worst := boundary_worst(records, starts):
        print("    at each checkpoint (the worst record sent within a second of a batch "
              f"start), in order: {', '.join(f'{w:,}' for w in worst)} ms")  # fmt: skip
    if found and len(starts) > 1:
        phases = [_since_batch_start(e.first_sent, starts) for e in found]
        known = [p for p in phases if p is not None]
        if known:
            near = sum(p < 500 for p in known)
            print(f"    episode start after its batch's start: median "
                  f"{statistics.median(known):,.0f} ms, "
                  f"within 500 ms of a batch start: {near} of {len(known)}")  # fmt: skip


def boundary_worst(
    records: Sequence[Traced], starts: Sequence[int], around_ms: int = 1000
) -> list[int]:
    """The worst latency of the records sent within ``around_ms`` of each batch start but
    the first (a query's start): in Real-time Mode, what each checkpoint cost (the last
    batch's commit, the next one's planning and task launch)."""
    worst = []
    for start in sorted(starts)[1:]:
        waits = [r.out - r.sent for r in records if abs(r.sent - start) <= around_ms]
        if waits:
            worst.append(max(waits))
    return worst


def _since_batch_start(at: int, starts: Sequence[int]) -> int | None:
    before = [s for s in starts if s <= at]
    return at - before[-1] if before else None
