"""An SDP project with AUTO CDC flows, as a Lakeflow user writes it: customer change
events (JSON files, two chunks) into a streaming table, applied as SCD type 1 and as SCD
type 2 tracking the city only (Python, ``dp.create_auto_cdc_flow``), as SCD type 2 of
every column (SQL, ``CREATE FLOW ... AS AUTO CDC INTO``), and a materialized view of the
current versions. The events come out of order, duplicated (within and across chunks),
with a delete and a re-insert of the deleted key; ``EXPECTED`` is every table's rows
after each chunk, worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SPEC = """\
name: crm
storage: {folder}/storage
configuration:
  spark.sql.shuffle.partitions: "2"
libraries:
  - glob:
      include: transformations/**
"""

CHANGES_PY = """\
from pathlib import Path

from pyspark import pipelines as dp
from pyspark.sql import functions as F

DATA = Path(__file__).resolve().parent.parent / "data"


@dp.table
def customer_changes():
    return (
        spark.readStream.format("json")
        .schema("id INT, name STRING, city STRING, op STRING, seq LONG")
        .load(str(DATA / "changes"))
    )


dp.create_streaming_table("customers")
dp.create_auto_cdc_flow(
    target="customers",
    source="customer_changes",
    keys=["id"],
    sequence_by=F.col("seq"),
    apply_as_deletes=F.expr("op = 'DELETE'"),
    column_list=["id", "name", "city"],
    stored_as_scd_type=1,
)

dp.create_streaming_table("customers_by_city")
dp.create_auto_cdc_flow(
    target="customers_by_city",
    source="customer_changes",
    keys=["id"],
    sequence_by="seq",
    apply_as_deletes="op = 'DELETE'",
    except_column_list=["op", "seq"],
    stored_as_scd_type=2,
    track_history_column_list=["city"],
)
"""

HISTORY_SQL = """\
CREATE OR REFRESH STREAMING TABLE customers_history;

-- every version of every column; the events' own op and seq left out
CREATE FLOW customers_history_cdc AS AUTO CDC INTO customers_history
FROM STREAM(customer_changes)
KEYS (id)
APPLY AS DELETE WHEN op = 'DELETE'
SEQUENCE BY seq
COLUMNS * EXCEPT (op, seq)
STORED AS SCD TYPE 2;

CREATE MATERIALIZED VIEW current_cities AS
SELECT id, city FROM customers_history WHERE __END_AT IS NULL;
"""

CHANGES: list[list[dict[str, Any]]] = [
    [
        {"id": 1, "name": "Ann", "city": "Oslo", "op": "UPSERT", "seq": 1},
        {"id": 2, "name": "Bob", "city": "Rome", "op": "UPSERT", "seq": 2},
        {"id": 1, "name": "Ann", "city": "Bergen", "op": "UPSERT", "seq": 5},
        {"id": 2, "name": "Bob", "city": "Rome", "op": "UPSERT", "seq": 2},  # duplicate
        {"id": 1, "name": "Ann", "city": "Tromso", "op": "UPSERT", "seq": 3},  # late
        {"id": 2, "name": "Robert", "city": "Rome", "op": "UPSERT", "seq": 3},  # name only
        {"id": 3, "name": "Cy", "city": "Paris", "op": "UPSERT", "seq": 4},
        {"id": 3, "name": None, "city": None, "op": "DELETE", "seq": 6},
    ],
    [
        {"id": 3, "name": "Cy", "city": "Lyon", "op": "UPSERT", "seq": 8},  # re-insert
        {"id": 2, "name": "Bob", "city": "Rome", "op": "UPSERT", "seq": 2},  # duplicate again
        {"id": 1, "name": "Ann", "city": "Oslo", "op": "UPSERT", "seq": 4},  # late
        {"id": 2, "name": "Robert", "city": "Milan", "op": "UPSERT", "seq": 7},
    ],
]

DATASETS = ("customers", "customers_by_city", "customers_history", "current_cities")

# (id, name, city, __SEQUENCE) / (id, name, city, __START_AT, __END_AT) / (id, city)
EXPECTED: list[dict[str, list[tuple[Any, ...]]]] = [
    {
        "customers": [(1, "Ann", "Bergen", 5), (2, "Robert", "Rome", 3)],
        "customers_by_city": [
            (1, "Ann", "Bergen", 5, None),
            (1, "Ann", "Oslo", 1, 3),
            (1, "Ann", "Tromso", 3, 5),
            (2, "Robert", "Rome", 2, None),
            (3, "Cy", "Paris", 4, 6),
        ],
        "customers_history": [
            (1, "Ann", "Bergen", 5, None),
            (1, "Ann", "Oslo", 1, 3),
            (1, "Ann", "Tromso", 3, 5),
            (2, "Bob", "Rome", 2, 3),
            (2, "Robert", "Rome", 3, None),
            (3, "Cy", "Paris", 4, 6),
        ],
        "current_cities": [(1, "Bergen"), (2, "Rome")],
    },
    {
        "customers": [(1, "Ann", "Bergen", 5), (2, "Robert", "Milan", 7), (3, "Cy", "Lyon", 8)],
        "customers_by_city": [
            (1, "Ann", "Bergen", 5, None),
            (1, "Ann", "Oslo", 1, 3),
            (1, "Ann", "Oslo", 4, 5),
            (1, "Ann", "Tromso", 3, 4),
            (2, "Robert", "Milan", 7, None),
            (2, "Robert", "Rome", 2, 7),
            (3, "Cy", "Lyon", 8, None),
            (3, "Cy", "Paris", 4, 6),
        ],
        "customers_history": [
            (1, "Ann", "Bergen", 5, None),
            (1, "Ann", "Oslo", 1, 3),
            (1, "Ann", "Oslo", 4, 5),
            (1, "Ann", "Tromso", 3, 4),
            (2, "Bob", "Rome", 2, 3),
            (2, "Robert", "Milan", 7, None),
            (2, "Robert", "Rome", 3, 7),
            (3, "Cy", "Lyon", 8, None),
            (3, "Cy", "Paris", 4, 6),
        ],
        "current_cities": [(1, "Bergen"), (2, "Milan"), (3, "Lyon")],
    },
]


def write_project(folder: Path) -> None:
    """The project's files in ``folder``; no change events yet."""
    files = {
        "spark-pipeline.yml": SPEC.format(folder=folder.resolve()),
        "transformations/changes.py": CHANGES_PY,
        "transformations/history.sql": HISTORY_SQL,
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "data/changes").mkdir(parents=True, exist_ok=True)


def deliver(folder: Path, chunk: int) -> None:
    """Chunk ``chunk`` of the change events, as one new file."""
    text = "".join(json.dumps(event) + "\n" for event in CHANGES[chunk])
    (folder / f"data/changes/part-{chunk}.json").write_text(text, encoding="utf-8")


def tables(folder: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every dataset's rows, sorted, read from its Delta log without Spark."""
    return {name: sorted(_rows(folder, name), key=repr) for name in DATASETS}


def _rows(folder: Path, name: str) -> list[tuple[Any, ...]]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(folder / "storage/tables" / name)).to_pyarrow_table().to_pylist()
    return [tuple(row.values()) for row in rows]


def expected(chunks: int) -> dict[str, list[tuple[Any, ...]]]:
    """Every dataset's rows once the first ``chunks`` chunks are in, sorted as
    :func:`tables` sorts them."""
    return {name: sorted(rows, key=repr) for name, rows in EXPECTED[chunks - 1].items()}


# Partial updates and truncations: the same change events, with null columns an update
# leaves as they were, and a truncation; applied as SCD type 2 ignoring null updates
# (Python; this flow truncates nothing, so the truncating event is an update of key 0)
# and as SCD type 1 ignoring null updates and truncating (SQL).
PARTIAL_PY = (
    CHANGES_PY.split('dp.create_streaming_table("customers")', maxsplit=1)[0]
    + """\
dp.create_streaming_table("customer_versions")
dp.create_auto_cdc_flow(
    target="customer_versions",
    source="customer_changes",
    keys=["id"],
    sequence_by="seq",
    ignore_null_updates=True,
    apply_as_deletes="op = 'DELETE'",
    except_column_list=["op", "seq"],
    stored_as_scd_type=2,
)
"""
)

PARTIAL_SQL = """\
CREATE OR REFRESH STREAMING TABLE customers_since_reset;

CREATE FLOW customers_since_reset_cdc AS AUTO CDC INTO customers_since_reset
FROM STREAM(customer_changes)
KEYS (id)
IGNORE NULL UPDATES
APPLY AS DELETE WHEN op = 'DELETE'
APPLY AS TRUNCATE WHEN op = 'TRUNCATE'
SEQUENCE BY seq
COLUMNS * EXCEPT (op, seq)
STORED AS SCD TYPE 1;
"""

PARTIAL_CHANGES = [
    {"id": 1, "name": "Ann", "city": "Oslo", "op": "UPSERT", "seq": 1},
    {"id": 2, "name": "Bob", "city": "Rome", "op": "UPSERT", "seq": 2},
    {"id": 1, "name": None, "city": "Bergen", "op": "UPSERT", "seq": 4},
    {"id": 1, "name": "Anna", "city": None, "op": "UPSERT", "seq": 3},  # late
    {"id": 0, "name": None, "city": None, "op": "TRUNCATE", "seq": 5},
    {"id": 3, "name": "Cy", "city": None, "op": "UPSERT", "seq": 6},
    {"id": 3, "name": None, "city": "Paris", "op": "UPSERT", "seq": 7},
]

PARTIAL_EXPECTED: dict[str, list[tuple[Any, ...]]] = {
    # (id, name, city, __START_AT, __END_AT)
    "customer_versions": [
        (0, None, None, 5, None),
        (1, "Ann", "Oslo", 1, 3),
        (1, "Anna", "Oslo", 3, 4),
        (1, "Anna", "Bergen", 4, None),
        (2, "Bob", "Rome", 2, None),
        (3, "Cy", None, 6, 7),
        (3, "Cy", "Paris", 7, None),
    ],
    # (id, name, city, __SEQUENCE): keys 1 and 2 truncated at 5
    "customers_since_reset": [(3, "Cy", "Paris", 7)],
}


def write_partial_project(folder: Path) -> None:
    """The partial-update project in ``folder``, its change events delivered."""
    files = {
        "spark-pipeline.yml": SPEC.format(folder=folder.resolve()),
        "transformations/changes.py": PARTIAL_PY,
        "transformations/reset.sql": PARTIAL_SQL,
        "data/changes/part-0.json": "".join(json.dumps(e) + "\n" for e in PARTIAL_CHANGES),
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")


# Two AUTO CDC flows into each of two tables (SCD type 1 and 2), from two sources: the
# CRM's changes and the web shop's, ordered together by their sequence.
TWO_SOURCES_PY = """\
from pathlib import Path

from pyspark import pipelines as dp

DATA = Path(__file__).resolve().parent.parent / "data"

for origin in ("crm", "web"):

    @dp.table(name=f"{origin}_changes")
    def changes():
        return (
            spark.readStream.format("json")
            .schema("id INT, name STRING, city STRING, op STRING, seq LONG")
            .load(str(DATA / origin))
        )

for scd in (1, 2):
    dp.create_streaming_table(f"customers_scd{scd}")
    for origin in ("crm", "web"):
        dp.create_auto_cdc_flow(
            target=f"customers_scd{scd}",
            source=f"{origin}_changes",
            name=f"customers_scd{scd}_from_{origin}",
            keys=["id"],
            sequence_by="seq",
            apply_as_deletes="op = 'DELETE'",
            except_column_list=["op", "seq"],
            stored_as_scd_type=scd,
        )
"""

TWO_SOURCES = {
    "crm": [
        {"id": 1, "name": "Ann", "city": "Oslo", "op": "UPSERT", "seq": 1},
        {"id": 2, "name": "Bob", "city": "Rome", "op": "UPSERT", "seq": 2},
        {"id": 1, "name": "Ann", "city": "Bergen", "op": "UPSERT", "seq": 5},
    ],
    "web": [
        {"id": 1, "name": "Ann", "city": "Tromso", "op": "UPSERT", "seq": 3},
        {"id": 2, "name": None, "city": None, "op": "DELETE", "seq": 4},
        {"id": 3, "name": "Cy", "city": "Paris", "op": "UPSERT", "seq": 6},
    ],
}

TWO_SOURCES_EXPECTED: dict[str, list[tuple[Any, ...]]] = {
    "customers_scd1": [(1, "Ann", "Bergen", 5), (3, "Cy", "Paris", 6)],
    "customers_scd2": [
        (1, "Ann", "Bergen", 5, None),
        (1, "Ann", "Oslo", 1, 3),
        (1, "Ann", "Tromso", 3, 5),
        (2, "Bob", "Rome", 2, 4),
        (3, "Cy", "Paris", 6, None),
    ],
}


def write_two_sources_project(folder: Path) -> None:
    """The two-source project in ``folder``, each source's change events delivered."""
    files = {
        "spark-pipeline.yml": SPEC.format(folder=folder.resolve()),
        "transformations/customers.py": TWO_SOURCES_PY,
        **{
            f"data/{origin}/part-0.json": "".join(json.dumps(e) + "\n" for e in events)
            for origin, events in TWO_SOURCES.items()
        },
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")


def sorted_tables(folder: Path, names: Any) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of the tables ``names``, each table's sorted by repr."""
    return {name: sorted(_rows(folder, name), key=repr) for name in names}
