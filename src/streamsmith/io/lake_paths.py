"""Where the lake keeps its tables, and which folders are tables: paths only, no Spark.

Split from :mod:`streamsmith.io.lake` so that readers without a JVM (the DuckDB fast
path of ``streamsmith query``) find the same tables the Spark side registers.
"""

from __future__ import annotations

from pathlib import Path

from streamsmith.errors import UserError

TABLES_DIR = "tables"
BACKFILL_DIR = "backfill"
CHECKPOINTS_DIR = "checkpoints"
MODELS_DIR = "models"
MODEL_FILE = "current.json"
COMMIT_LOG = "_spark_metadata"
DELTA_LOG = "_delta_log"  # a Delta table's transaction log
# Spark ignores files whose names start with "_", so the schema can sit beside the data.
# It lets an empty table (a quarantine that never received a row) still be queried.
SCHEMA_FILE = "_streamsmith_schema.json"


def table_path(root: Path, table: str) -> Path:
    """Where the streaming pipeline keeps ``table``."""
    return root / TABLES_DIR / table


def model_path(root: Path, model: str) -> Path:
    """The current parameters of a model trained on the lake (``streamsmith train``)."""
    return root / MODELS_DIR / model / MODEL_FILE


def backfill_path(root: Path, table: str) -> Path:
    """Where ``streamsmith backfill`` writes ``table``: apart from the streaming output."""
    return root / BACKFILL_DIR / table


def is_table(path: Path) -> bool:
    """Whether a folder holds a table Spark can read: a Delta log, a saved schema or
    Parquet files."""
    return path.is_dir() and (
        is_delta(path) or (path / SCHEMA_FILE).is_file() or any(path.rglob("*.parquet"))
    )


def is_delta(path: Path) -> bool:
    """Whether ``path`` holds a Delta table (a transaction log with a commit)."""
    log = path / DELTA_LOG
    return log.is_dir() and any(log.glob("*.json"))


def lake_tables(root: Path) -> dict[str, Path]:
    """Every table under the storage root, by view name.

    Streaming tables keep their name; backfilled tables get the suffix ``_backfill``.
    """
    found: dict[str, Path] = {}
    for folder, suffix in ((TABLES_DIR, ""), (BACKFILL_DIR, "_backfill")):
        base = root / folder
        if not base.is_dir():
            continue
        for child in sorted(base.iterdir()):
            if child.is_dir() and not child.name.startswith((".", "_")) and is_table(child):
                found[f"{child.name}{suffix}"] = child
    return found


def lake_table(root: Path, name: str) -> Path:
    """The folder of the lake table ``name`` (as ``query`` names it: a streaming table, or
    ``<table>_backfill``), found among :func:`lake_tables` only, so that a name with
    ``../`` or an absolute one can never reach a folder outside the lake."""
    tables = lake_tables(root)
    path = tables.get(name) or {key.lower(): p for key, p in tables.items()}.get(name.lower())
    if path is None:
        known = ", ".join(tables) or "none yet"
        raise UserError(f"no lake table {name!r} under {root} (its tables: {known})")
    return path
