"""What the benchmark scripts share (run them as scripts: this folder is on their path)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from streamsmith.apps.ysb import kafka_sets
from streamsmith.generate import produce_all
from streamsmith.generate.ysb import write_ysb, ysb_data
from streamsmith.io.kafka.broker import start_broker
from streamsmith.io.lake import replace_static_table, table_path
from streamsmith.schemas.ysb import CAMPAIGNS_SCHEMA

YSB_TOPIC = "ysb-ads"


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


@contextmanager
def ysb_input(root: Path, events: int, *, kafka: bool) -> Iterator[list[str]]:
    """YSB input under ``root``: ``events`` ad events as JSON-lines files and the campaigns
    table and, with ``kafka``, the same events in a 3-partition topic of an embedded
    broker (up while the context lasts). Yields the ``--set`` lines that point the ysb
    app at them (none for the files, its default)."""
    data = ysb_data(events, rate=10_000, chunks=8, seed=1)
    write_ysb(data, root / "input" / "ysb")
    replace_static_table(table_path(root, "ysb_campaigns"), data.campaigns, CAMPAIGNS_SCHEMA)
    if not kafka:
        yield []
        return
    with start_broker(root / "broker") as broker:
        broker.create_topic(YSB_TOPIC, partitions=3)
        produce_all(broker.bootstrap, YSB_TOPIC, data.lines, [None] * len(data.lines))
        yield kafka_sets(broker.bootstrap, YSB_TOPIC)
