"""What a Delta table's versions did, from its transaction log: the schema they changed,
the query that wrote them, the rows they changed.

Delta's history names each commit's operation (``STREAMING UPDATE``, ``MERGE`` ...) but
not that a streaming append with ``mergeSchema`` added a column: the commit only carries
a new ``metaData`` action. Schema evolution (``add_new_columns``, ``rescue``) grows a
table that way, so ``streamsmith table history`` reads each listed commit's log entry
for such an action and says which columns it added, changed or dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

LOG_DIR = "_delta_log"
_COMMIT_FILE = re.compile(r"\d{20}\.json")


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


def commit_infos(path: Path, limit: int | None = None) -> Iterator[dict[str, Any]]:
    """The ``commitInfo`` of each commit the log of the table at ``path`` still holds,
    newest first (at most ``limit``), each with its ``version``: what ``DESCRIBE
    HISTORY`` shows. Read from the commit files (local or object store) rather than by
    delta-rs, whose history refuses a ``CONVERT TO DELTA`` commit (``readVersion: -1``)."""
    versions = sorted(
        (int(entry.name[:-5]) for entry in (path / LOG_DIR).glob("*.json")
         if _COMMIT_FILE.fullmatch(entry.name)),
        reverse=True,
    )  # fmt: skip
    for version in versions[:limit]:
        found = _actions(path / LOG_DIR / f"{version:020d}.json", '"commitInfo"')
        info = (found[0].get("commitInfo") if found else None) or {}
        yield {**info, "version": version}


def commit_writers(path: Path, versions: Iterable[int]) -> dict[int, str]:
    """Per version of ``versions`` whose commit carries a ``txn`` action, its ``appId``:
    the query id of a streaming append (Delta's streaming sink), or the ``txnAppId`` of
    a ``foreachBatch`` write (``streamsmith:<app>:<query>``): which query wrote it."""
    writers = {}
    for version in versions:
        for action in _actions(path / LOG_DIR / f"{version:020d}.json", '"txn"'):
            app_id = (action.get("txn") or {}).get("appId")
            if app_id:
                writers[version] = str(app_id)
                break
    return writers


def rows_in_out(metrics: Mapping[str, Any]) -> tuple[int | None, str]:
    """What a version did to the table's rows, from its ``operationMetrics``: the rows it
    was given (a MERGE's source rows, an append's rows) and its change, ``+inserted
    ~updated -deleted`` for a MERGE, ``+rows`` for an append, ``-rows`` for a DELETE;
    (None, "") for an operation that changes no row (OPTIMIZE, a schema change)."""

    def count(name: str) -> int:
        return int(metrics.get(name) or 0)

    if "numSourceRows" in metrics:
        changed = (count(f"numTargetRows{kind}") for kind in ("Inserted", "Updated", "Deleted"))
        return count("numSourceRows"), "+{} ~{} -{}".format(*changed)
    if "numOutputRows" in metrics:
        return count("numOutputRows"), f"+{count('numOutputRows')}"
    if "numDeletedRows" in metrics:
        return None, f"-{count('numDeletedRows')}"
    return None, ""


def _committed_schema(commit: Path) -> dict[str, Any] | None:
    """The schema a commit's ``metaData`` action sets, if it has one."""
    for action in _actions(commit, '"metaData"'):
        text = (action.get("metaData") or {}).get("schemaString")
        if text:
            schema: dict[str, Any] = json.loads(text)
            return schema
    return None


def _actions(commit: Path, word: str) -> list[dict[str, Any]]:
    """The actions of a commit file whose line holds ``word`` (none when the file is
    gone: cleaned up past the log retention)."""
    try:
        lines = commit.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if word in line]


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
