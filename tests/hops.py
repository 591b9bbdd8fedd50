"""A three-hop pipeline for the tests: raw order files -> cleaned (Delta, appended) ->
totals per customer (Delta, merged by key) -> the history of the totals (read from their
change data feed). Every sink says ``format: delta`` itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

SPEC: dict[str, Any] = {
    "name": "shop",
    "storage_root": "data",
    "spark": {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": 2}},
    "sources": {
        "raw_orders": {"format": "jsonl", "path": "input/orders",
                       "schema": "order_id string, customer string, amount double, status string"},
        "totals_feed": {"format": "delta", "table": "totals", "read_change_feed": True},
    },
    "flows": {
        "cleaned": {
            "source": "raw_orders",
            "sql": "SELECT order_id, lower(trim(customer)) AS customer, amount FROM raw_orders "
                   "WHERE status = 'paid'",
            "sink": {"format": "delta", "table": "cleaned"},
        },
        "totals": {
            "source": "cleaned",  # the table of flow cleaned, read as a stream
            "sql": "SELECT customer, count(*) AS orders, sum(amount) AS amount FROM cleaned "
                   "GROUP BY customer",
            "sink": {"format": "delta", "table": "totals", "output_mode": "update",
                     "keys": ["customer"]},
        },
        "history": {
            "source": "totals_feed",
            "sql": "SELECT customer, orders, amount, _change_type AS change, "
                   "_commit_version AS version FROM totals_feed "
                   "WHERE _change_type IN ('insert', 'update_postimage')",
            "sink": {"format": "delta", "table": "history"},
        },
    },
}  # fmt: skip
DELIVERIES = [
    [("o1", "Ann", 10.0, "paid"), ("o2", "bob", 5.0, "paid"), ("o3", "ann", 7.0, "cancelled"),
     ("o4", " Cid ", 2.0, "paid")],
    [("o5", "ANN", 1.5, "paid"), ("o6", "bob", 4.0, "refunded"), ("o7", "dee", 3.0, "paid")],
]  # fmt: skip
CLEANED = [
    ("o1", "ann", 10.0), ("o2", "bob", 5.0), ("o4", "cid", 2.0), ("o5", "ann", 1.5),
    ("o7", "dee", 3.0),
]  # fmt: skip
TOTALS = [("ann", 2, 11.5), ("bob", 1, 5.0), ("cid", 1, 2.0), ("dee", 1, 3.0)]
# The cleaning rule a full refresh of the middle table brings in: orders of 3 or more.
BIG_ORDERS = (
    "flows.cleaned.sql=SELECT order_id, lower(trim(customer)) AS customer, amount "
    "FROM raw_orders WHERE status = 'paid' AND amount >= 3"
)
BIG_TOTALS = [("ann", 1, 10.0), ("bob", 1, 5.0), ("dee", 1, 3.0)]


def write_project(folder: Path, spec: dict[str, Any] | None = None) -> Path:
    (folder / "data/input/orders").mkdir(parents=True, exist_ok=True)
    path = folder / "streamsmith.yml"
    path.write_text(yaml.safe_dump(spec or SPEC))
    return path


def deliver(folder: Path, number: int) -> None:
    """Delivery ``number`` as one file, whole or not at all (a run may list the folder
    at any moment)."""
    lines = [
        json.dumps({"order_id": order, "customer": who, "amount": amount, "status": status})
        for order, who, amount, status in DELIVERIES[number]
    ]
    staging = folder / f"data/input/orders/.part-{number}.tmp"
    staging.write_text("\n".join(lines) + "\n")
    staging.replace(folder / f"data/input/orders/part-{number}.jsonl")


def latest_per_customer(history: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The last change of each customer's totals in the history: the totals themselves."""
    last: dict[str, dict[str, Any]] = {}
    for row in sorted(history, key=lambda row: row["version"]):
        last[row["customer"]] = row
    return sorted((r["customer"], r["orders"], r["amount"]) for r in last.values())
