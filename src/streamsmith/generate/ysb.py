"""Yahoo Streaming Benchmark input: ad events at a steady event-time rate, and campaigns.

Ads belong to campaigns (1,000 ads over 100 campaigns, as YSB sets it up). Events come
at ``rate`` per second of event time from ``start``, in time order; each picks an ad, an
ad type and an event type uniformly (a third are views), with fresh UUIDs for the user
and page. Lines are written by hand, not by ``json.dumps``: a million events must not
take longer to make than to process. A ``corrupt_fraction`` of extra lines is broken
(not JSON, or an unknown event type), so every real event still arrives.

:class:`YsbData` keeps the ground truth: views per (campaign, 10-second window start).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from streamsmith.generate import check_corruption_and_time
from streamsmith.generate.events import write_line_chunks
from streamsmith.schemas.ysb import AD_TYPES, EVENT_TYPES

START = datetime(2026, 11, 20, 12, tzinfo=UTC)
WINDOW = timedelta(seconds=10)


@dataclass
class YsbData:
    """Lines per chunk, the ad -> campaign table and the views per campaign and window."""

    campaigns: list[tuple[str, str]]
    chunks: list[list[bytes]]
    views: Counter[tuple[str, datetime]] = field(default_factory=Counter)
    events: int = 0
    corrupt: int = 0
    first_time: datetime = START
    last_time: datetime = START

    @property
    def lines(self) -> list[bytes]:
        return [line for chunk in self.chunks for line in chunk]

    def closed_views(self, delay: timedelta) -> Counter[tuple[str, datetime]]:
        """The views of the windows a watermark ``delay`` behind the newest event has
        closed: what an append-mode stream has emitted once its input is read."""
        watermark = self.last_time - delay
        return Counter({k: n for k, n in self.views.items() if k[1] + WINDOW <= watermark})


def ysb_campaigns(ads: int = 1000, campaigns: int = 100, seed: int = 1) -> list[tuple[str, str]]:
    """``(ad_id, campaign_id)`` rows: ``ads`` ads spread evenly over ``campaigns``."""
    if ads < 1 or campaigns < 1:
        raise ValueError(f"ads and campaigns must be at least 1, got {ads} and {campaigns}")
    rng = random.Random(seed)
    campaign_ids = [_uuid(rng) for _ in range(campaigns)]
    return [(_uuid(rng), campaign_ids[i % campaigns]) for i in range(ads)]


def ysb_data(
    events: int,
    *,
    rate: float = 10_000,
    chunks: int = 10,
    seed: int = 1,
    corrupt_fraction: float = 0.0,
    start: datetime = START,
    campaigns: list[tuple[str, str]] | None = None,
) -> YsbData:
    """``events`` ad events at ``rate`` per second of event time, in ``chunks`` files'
    worth of lines (chunk *k* holds the *k*-th slice of the events)."""
    if events < 1 or rate <= 0 or chunks < 1:
        raise ValueError(
            f"events and chunks must be at least 1 and rate positive, got {events}, "
            f"{chunks} and {rate}"
        )
    check_corruption_and_time(corrupt_fraction, start, timedelta(seconds=events / rate))
    rng = random.Random(seed)
    table = campaigns if campaigns is not None else ysb_campaigns(seed=seed)
    campaign_of = dict(table)
    ads = list(campaign_of)
    data = YsbData(table, [[] for _ in range(chunks)], events=events, first_time=start)
    start_ms = int(start.timestamp() * 1000)
    window_ms = int(WINDOW.total_seconds() * 1000)
    per_chunk = -(-events // chunks)
    stamp_ms, stamp = -1, ""
    for index in range(events):
        at_ms = start_ms + int(index * 1000 / rate)
        if at_ms != stamp_ms:  # many events share a millisecond at high rates
            stamp_ms, stamp = at_ms, _stamp(at_ms)
        ad, event_type = rng.choice(ads), rng.choice(EVENT_TYPES)
        line = _line(rng, ad, rng.choice(AD_TYPES), event_type, stamp)
        chunk = data.chunks[index // per_chunk]
        chunk.append(line)
        if event_type == "view":
            window = datetime.fromtimestamp(at_ms // window_ms * window_ms / 1000, UTC)
            data.views[(campaign_of[ad], window)] += 1
        if corrupt_fraction and rng.random() < corrupt_fraction:
            chunk.append(_broken(rng, line))
            data.corrupt += 1
    last_ms = start_ms + int((events - 1) * 1000 / rate)
    data.last_time = datetime.fromtimestamp(last_ms / 1000, UTC)
    return data


def write_ysb(data: YsbData, folder: Path) -> list[Path]:
    """One JSON-lines file per chunk under ``folder``."""
    return write_line_chunks(data.chunks, folder, "ysb")


def _uuid(rng: random.Random) -> str:
    """A random version-4 UUID drawn from ``rng`` (reproducible, unlike ``uuid4``)."""
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


def _stamp(at_ms: int) -> str:
    moment = datetime.fromtimestamp(at_ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at_ms % 1000:03d}Z"


def _line(rng: random.Random, ad: str, ad_type: str, event_type: str, stamp: str) -> bytes:
    ip = ".".join(map(str, rng.getrandbits(32).to_bytes(4, "big")))
    return (
        f'{{"user_id":"{_uuid(rng)}","page_id":"{_uuid(rng)}","ad_id":"{ad}",'
        f'"ad_type":"{ad_type}","event_type":"{event_type}","event_time":"{stamp}",'
        f'"ip_address":"{ip}"}}'
    ).encode()


def _broken(rng: random.Random, line: bytes) -> bytes:
    """A cut-short copy of ``line`` (not JSON) or one with an unknown event type."""
    if rng.random() < 0.5:
        return line[: len(line) // 2]
    for event_type in EVENT_TYPES:
        line = line.replace(f'"event_type":"{event_type}"'.encode(), b'"event_type":"hover"')
    return line
