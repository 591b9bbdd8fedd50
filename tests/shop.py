"""A small pipeline for the tests of table maintenance and materialized views: order
files (``data/input``) -> the ``orders`` table, catch-up runs; each test adds its flows."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

BASE: dict[str, Any] = {
    "name": "shop",
    "storage_root": "data",
    "trigger": "available-now",
    "spark": {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": 2}},
    "sources": {"raw": {"format": "jsonl", "path": "input",
                        "schema": "order_id string, customer string, amount int"}},
    "flows": {"orders": {"source": "raw", "sql": "SELECT order_id, customer, amount FROM raw",
                         "sink": {"table": "orders"}}},
}  # fmt: skip
ORDER_COLUMNS = "order_id string, customer string, amount int"
Order = tuple[str, str, int]


def shop_spec(**changes: Any) -> dict[str, Any]:
    """The base spec with ``changes`` over its top-level keys (a copy)."""
    return {**copy.deepcopy(BASE), **changes}


def write_project(folder: Path, spec: dict[str, Any]) -> Path:
    (folder / "data/input").mkdir(parents=True, exist_ok=True)
    path = folder / "streamsmith.yml"
    path.write_text(yaml.safe_dump(spec))
    return path


def deliver(folder: Path, number: int, orders: list[Order]) -> None:
    """Delivery ``number``: one file of ``orders``."""
    lines = [json.dumps({"order_id": o, "customer": c, "amount": a}) for o, c, a in orders]
    (folder / f"data/input/part-{number}.jsonl").write_text("\n".join(lines) + "\n")
