"""The acceptance project for SDP (issue 51): ``sdp_shop``'s project (streaming tables,
a temporary view, an append-flow target fed by two flows, a materialized view with a
join, ``spark-pipelines init``'s examples) and ``sdp_cdc``'s AUTO CDC flows (SCD 1 and 2,
Python and SQL) in one project, its orders and change events delivered in five chunks.
``expected`` works every dataset out in plain Python over the chunks so far: the CDC
tables by replaying the events by key and sequence, independently of ``sdp_cdc``'s
hand-worked rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sdp_cdc
import sdp_shop

CHUNKS = 5
# sdp_cdc's SCD 1 table is renamed: sdp_shop has a materialized view ``customers``.
SCD1 = "customers_latest"
CHANGES_PY = sdp_cdc.CHANGES_PY.replace('"customers")', f'"{SCD1}")').replace(
    'target="customers",', f'target="{SCD1}",'
)
DATASETS = (*sdp_shop.DATASETS, SCD1, *sdp_cdc.DATASETS[1:])
ORDERS = [order for chunk in sdp_shop.ORDERS for order in chunk]
CHANGES = [event for chunk in sdp_cdc.CHANGES for event in chunk]


def _chunk(items: list[dict[str, Any]], chunk: int) -> list[dict[str, Any]]:
    return items[chunk::CHUNKS]  # every chunk has some of each, out of order


def write_project(folder: Path) -> None:
    """Both projects' files in ``folder``, under ``sdp_shop``'s spec; no events yet."""
    sdp_shop.write_project(folder)
    for name, text in (("changes.py", CHANGES_PY), ("history.sql", sdp_cdc.HISTORY_SQL)):
        (folder / "transformations" / name).write_text(text, encoding="utf-8")
    (folder / "data/changes").mkdir(parents=True, exist_ok=True)


def deliver(folder: Path, chunk: int) -> None:
    """Chunk ``chunk`` (from 0) of the orders and of the change events, a file each."""
    for kind, items in (("orders", ORDERS), ("changes", CHANGES)):
        text = "".join(json.dumps(item) + "\n" for item in _chunk(items, chunk))
        (folder / f"data/{kind}/part-{chunk}.json").write_text(text, encoding="utf-8")


def tables(folder: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every dataset's rows, sorted, read from its Delta log without Spark."""
    from deltalake import DeltaTable

    found = {}
    for name in DATASETS:
        table = DeltaTable(str(folder / "pipeline-storage/tables" / name)).to_pyarrow_table()
        found[name] = sorted((tuple(row.values()) for row in table.to_pylist()), key=repr)
    return found


def expected(chunks: int) -> dict[str, list[tuple[Any, ...]]]:
    """Every dataset's rows once the first ``chunks`` chunks are in, sorted as
    :func:`tables` sorts them."""
    orders = [o for chunk in range(chunks) for o in _chunk(ORDERS, chunk)]
    events = [e for chunk in range(chunks) for e in _chunk(CHANGES, chunk)]
    found = sdp_shop.expected(1, [orders])
    history = _scd2(events, ("name", "city"))
    found |= {
        SCD1: _scd1(events),
        "customers_by_city": _scd2(events, ("city",)),
        "customers_history": history,
        "current_cities": [(v[0], v[2]) for v in history if v[4] is None],
    }
    return {name: sorted(rows, key=repr) for name, rows in found.items()}


def _by_key(events: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Each key's events in sequence order, duplicates (same sequence) once."""
    keyed: dict[int, dict[int, dict[str, Any]]] = {}
    for event in events:
        keyed.setdefault(event["id"], {})[event["seq"]] = event
    return {key: [seqs[s] for s in sorted(seqs)] for key, seqs in keyed.items()}


def _scd1(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """(id, name, city, __SEQUENCE): each key's latest event, unless a delete."""
    latest = [history[-1] for history in _by_key(events).values()]
    return [(e["id"], e["name"], e["city"], e["seq"]) for e in latest if e["op"] != "DELETE"]


def _scd2(events: list[dict[str, Any]], tracked: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """(id, name, city, __START_AT, __END_AT): a version per change of a ``tracked``
    column, ended by the next version or a delete; an untracked change updates the
    open version in place."""
    rows = []
    for key, history in _by_key(events).items():
        open_version: list[Any] | None = None
        for event in history:
            values = [key, event["name"], event["city"], event["seq"], None]
            if event["op"] == "DELETE":
                if open_version is not None:
                    open_version[4] = event["seq"]
                    rows.append(tuple(open_version))
                open_version = None
            elif open_version is None:
                open_version = values
            elif any(event[c] != open_version[1 + ("name", "city").index(c)] for c in tracked):
                open_version[4] = event["seq"]
                rows.append(tuple(open_version))
                open_version = values
            else:
                open_version[1:3] = values[1:3]
        if open_version is not None:
            rows.append(tuple(open_version))
    return rows
