"""The pipeline of the tutorial "Change data capture" (docs/tutorials/change-data-capture.md)
for the tests: its files, as the tutorial gives them, and the rows its tables hold after
the first change file and after both."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

TUTORIAL = Path(__file__).resolve().parents[1] / "docs/tutorials/change-data-capture.md"
HISTORY = ("id", "name", "tier", "balance", "seq", "__START_AT", "__END_AT")
CURRENT = (*HISTORY[:5], "__SEQUENCE")
TIER = ("tier", "customers")
# customer_history, (id, name, tier, balance, seq, __START_AT, __END_AT)
FIRST = [
    (1, "Ann", "gold", 15, 4, 1, None), (2, "Bob", "silver", 20, 2, 2, 5),
    (2, "Bob", "gold", 20, 5, 5, None), (3, "Cid", "silver", 30, 3, 3, 6),
]  # fmt: skip
SECOND = [
    (1, "Ann", "gold", 15, 4, 1, 8), (1, "Ann", "platinum", 40, 8, 8, None),
    (2, "Bob", "silver", 20, 2, 2, 4), (2, "Bob", "gold", 20, 5, 5, None),
    (2, "Bobby", "silver", 25, 4, 4, 5), (3, "Cid", "silver", 30, 3, 3, 6),
    (4, "Dee", "silver", 5, 7, 7, None),
]  # fmt: skip
# customers (SCD1), (id, name, tier, balance, seq, __SEQUENCE), and customers_per_tier
CUSTOMERS = [
    [(1, "Ann", "gold", 15, 4, 4), (2, "Bob", "gold", 20, 5, 5)],
    [(1, "Ann", "platinum", 40, 8, 8), (2, "Bob", "gold", 20, 5, 5), (4, "Dee", "silver", 5, 7, 7)],
]  # fmt: skip
TIERS = [[("gold", 2)], [("gold", 1), ("platinum", 1), ("silver", 1)]]

_TITLED = re.compile(r'^```\w+ title="([^"]+)"\n((?:.*\n)*?)```', re.M)


def files() -> dict[str, str]:
    """The tutorial's titled blocks: the spec and the two change files, by name."""
    return dict(_TITLED.findall(TUTORIAL.read_text(encoding="utf-8")))


def rows(
    table: Path, columns: tuple[str, ...], version: int | None = None
) -> list[tuple[Any, ...]]:
    """A Delta table's rows (read without Spark), in the order of their values, nulls last."""
    found = DeltaTable(str(table), version=version).to_pyarrow_table().to_pylist()
    return ordered([tuple(row[c] for c in columns) for row in found])


def ordered(table: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(table, key=lambda row: tuple((value is None, value) for value in row))
