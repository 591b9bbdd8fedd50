"""A change feed with its answer computed independently: inserts, updates, deletes, exact
duplicates, a delete and an update sharing a sequence, and events arriving out of
sequence order; and, in plain Python over the whole feed, the type 1 and type 2 tables
it must give."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

SCHEMA = "id int, name string, tier string, balance int, op string, seq long, note string"
DATA = ("id", "name", "tier", "balance", "seq")  # the table's columns: op and note left out
TRACKED = ("name", "tier")  # type 2: balance (and seq) change in place
CDC = {
    "keys": ["id"],
    "sequence_by": "seq",
    "apply_as_deletes": "op = 'delete'",
    "except_columns": ["op", "note"],
}
SPEC: dict[str, Any] = {
    "name": "crm",
    "storage_root": "data",
    "sources": {
        "changes": {"format": "jsonl", "path": "input/changes", "schema": SCHEMA,
                    "max_files_per_trigger": 1},
    },
    "flows": {
        "customers": {
            "source": "changes", "sql": "SELECT * FROM changes",
            "cdc": {**CDC, "scd_type": 1},
            "sink": {"format": "delta", "table": "customers"},
        },
        "customer_history": {
            "source": "changes", "sql": "SELECT * FROM changes",
            "cdc": {**CDC, "scd_type": 2, "track_history_columns": list(TRACKED)},
            "sink": {"format": "delta", "table": "customer_history"},
        },
    },
}  # fmt: skip
Event = dict[str, Any]


def change_feed(seed: int, events: int = 120, keys: int = 8) -> list[Event]:
    """Events in arrival order: each key's changes in sequence, then shuffled within a
    window of about 20 sequence numbers, with duplicates and delete/update ties."""
    rng = random.Random(seed)
    feed: list[Event] = []
    for seq in range(1, events + 1):
        key = rng.randint(1, keys)
        if rng.random() < 0.15:
            event = {"id": key, "op": "delete", "seq": seq, "note": "gone"}
        else:
            event = {
                "id": key,
                "op": "upsert",
                "name": f"name-{key}-{rng.randint(0, 1)}",
                "tier": rng.choice(["gold", "silver", None]),
                "balance": rng.randint(0, 3),
                "seq": seq,
                "note": f"n{rng.randint(0, 9)}",
            }
        feed.append(event)
        if rng.random() < 0.1:
            feed.append(dict(event))  # delivered twice
        if rng.random() < 0.05 and event["op"] == "upsert":
            feed.append({"id": key, "op": "delete", "seq": seq, "note": "tie"})
    arrival = {id(e): e["seq"] + rng.uniform(0, 20) for e in feed}
    return sorted(feed, key=lambda e: arrival[id(e)])


def split_into_files(feed: list[Event], folder: Path, cuts: list[int], first: int = 0) -> int:
    """Write ``feed`` as JSON-lines files cut at ``cuts`` (positions), named in order from
    ``first``; returns the next file number."""
    folder.mkdir(parents=True, exist_ok=True)
    bounds = [0, *sorted(set(cuts)), len(feed)]
    number = first
    for start, end in itertools.pairwise(bounds):
        if start == end:
            continue
        lines = "".join(json.dumps(event) + "\n" for event in feed[start:end])
        (folder / f"changes-{number:04d}.jsonl").write_text(lines)
        number += 1
    return number


def _changes_by_key(feed: list[Event]) -> dict[int, list[Event]]:
    """One change per key and sequence (a delete wins a tie), in sequence order."""
    chosen: dict[tuple[int, int], Event] = {}
    for event in feed:
        at = (event["id"], event["seq"])
        if at not in chosen or event["op"] == "delete":
            chosen[at] = event
    by_key: dict[int, list[Event]] = {}
    for (key, _), event in sorted(chosen.items()):
        by_key.setdefault(key, []).append(event)
    return by_key


def _row(event: Event) -> tuple[Any, ...]:
    return tuple(event.get(c) for c in DATA)


def scd1(feed: list[Event]) -> set[tuple[Any, ...]]:
    """Type 1: each key's latest change, when it is not a delete (row, then __SEQUENCE)."""
    rows = set()
    for events in _changes_by_key(feed).values():
        last = events[-1]
        if last["op"] != "delete":
            rows.add((*_row(last), last["seq"]))
    return rows


def scd2(feed: list[Event]) -> set[tuple[Any, ...]]:
    """Type 2: versions (row, then __START_AT, __END_AT), walking each key's changes."""
    rows = set()
    for events in _changes_by_key(feed).values():
        current: list[Any] | None = None  # [row, start]
        for event in events:
            if event["op"] == "delete":
                if current is not None:
                    rows.add((*current[0], current[1], event["seq"]))
                    current = None
            elif current is None:
                current = [_row(event), event["seq"]]
            elif any(current[0][DATA.index(c)] != event.get(c) for c in TRACKED):
                rows.add((*current[0], current[1], event["seq"]))
                current = [_row(event), event["seq"]]
            else:
                current[0] = _row(event)  # untracked columns change in place
        if current is not None:
            rows.add((*current[0], current[1], None))
    return rows
