"""What a Delta table's versions changed in its schema, from its transaction log.

Delta's history names each commit's operation (``STREAMING UPDATE``, ``MERGE`` ...) but
not that a streaming append with ``mergeSchema`` added a column: the commit only carries
a new ``metaData`` action. Schema evolution (``add_new_columns``, ``rescue``) grows a
table that way, so ``streamsmith table history`` reads each listed commit's log entry
for such an action and says which columns it added, changed or dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

LOG_DIR = "_delta_log"


def schema_changes(path: Path, versions: Iterable[int]) -> dict[int, str]:
    """Per version of ``versions`` whose commit changed the table's schema (after its
    first), what changed: ``added city string; changed n: bigint -> string``. A commit
    file that is gone (its log entry cleaned up past the log retention) says nothing."""
    changes: dict[int, str] = {}
    for version in versions:
        if version <= 0:
            continue
        schema = _committed_schema(path / LOG_DIR / f"{version:020d}.json")
        if schema is None:
            continue
        before = _schema_at(path, version - 1)
        said = describe_change(before, schema)
        if said:
            changes[version] = said
    return changes


def describe_change(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """The difference of two Delta schemas (``schemaString`` JSON) by top-level column."""
    old, new = _columns(before), _columns(after)
    parts = []
    added = [f"{name} {kind}" for name, kind in new.items() if name not in old]
    if added:
        parts.append("added " + ", ".join(added))
    changed = [f"{name}: {old[name]} -> {kind}" for name, kind in new.items()
               if name in old and old[name] != kind]  # fmt: skip
    if changed:
        parts.append("changed " + ", ".join(changed))
    dropped = [name for name in old if name not in new]
    if dropped:
        parts.append("dropped " + ", ".join(dropped))
    return "; ".join(parts)


def _committed_schema(commit: Path) -> dict[str, Any] | None:
    """The schema a commit's ``metaData`` action sets, if it has one."""
    try:
        lines = commit.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    for line in lines:
        if '"metaData"' not in line:
            continue
        action = json.loads(line).get("metaData") or {}
        text = action.get("schemaString")
        if text:
            schema: dict[str, Any] = json.loads(text)
            return schema
    return None


def _schema_at(path: Path, version: int) -> dict[str, Any]:
    from deltalake import DeltaTable

    from streamsmith.object_store import storage_options

    table = DeltaTable(str(path), version=version, storage_options=storage_options(path))
    schema: dict[str, Any] = json.loads(table.schema().to_json())
    return schema


def _columns(schema: Mapping[str, Any]) -> dict[str, str]:
    return {field["name"]: _type_text(field["type"]) for field in schema.get("fields", [])}


def _type_text(kind: Any) -> str:
    """A Delta schema type as Spark's DDL writes it (``struct<lat:double>``)."""
    if isinstance(kind, str):
        return {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}.get(
            kind, kind
        )
    if kind.get("type") == "struct":
        members = ",".join(f"{f['name']}:{_type_text(f['type'])}" for f in kind["fields"])
        return f"struct<{members}>"
    if kind.get("type") == "array":
        return f"array<{_type_text(kind['elementType'])}>"
    if kind.get("type") == "map":
        return f"map<{_type_text(kind['keyType'])},{_type_text(kind['valueType'])}>"
    return str(kind.get("type"))
