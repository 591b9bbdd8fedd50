"""A source whose records gain a field (``schema_evolution: add_new_columns``).

The flow reads with the newest stored schema version. A batch holding a top-level field
that version lacks stops at its first such record (``transforms.events``), before any
of it is committed; the supervisor then stores a new version with the field added (its
type told from that record), and starts the query again on the same checkpoint, so the
batch runs again under the new schema: the field becomes a column from then on, rows
written before read it as null, and nothing in between is lost.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from streamsmith.io.schema_store import SchemaVersion, latest, record
from streamsmith.runtime.app import Transform
from streamsmith.schemas.inference import with_new_fields
from streamsmith.transforms.events import RecordParser, new_fields_in


def with_current_schema(parser: Transform | None, store: Path) -> Transform | None:
    """The flow's parser reading with the newest schema version in ``store``."""
    current = latest(store)
    if not isinstance(parser, RecordParser) or current is None:
        return parser
    return replace(parser, schema=current.schema)


def error_text(exception: object) -> str:
    """A failed query's or job's message with those of its causes: a Delta write wraps
    the batch's own error (the new-field stop among them) in ``TASK_WRITE_FAILED``,
    whose message only quotes the plan."""
    parts: list[str] = []
    seen: object | None = exception
    while seen is not None and len(parts) < 20:
        parts.append(str(getattr(seen, "desc", None) or seen))
        seen = getattr(seen, "_cause", None)
    return "\n".join(parts)


def refused_new_fields(error: str) -> str | None:
    """What to tell the user when a flow that may not gain fields met one
    (``fail_on_new_columns``); None when ``error`` is another."""
    found = new_fields_in(error)
    if found is None:
        return None
    names, source, _ = found
    return (
        f"new field(s) {', '.join(names)} in {source}, which the schema lacks; "
        "schema_evolution: fail_on_new_columns stops the flow: add them to the schema, or "
        "choose add_new_columns or rescue"
    )


def add_new_fields(store: Path, error: str) -> SchemaVersion | None:
    """The version that holds the new fields a query's ``error`` names (stored now, or
    already by another run); None when the error is not about new fields."""
    found = new_fields_in(error)
    if found is None:
        return None
    names, source, values = found
    current = latest(store)
    if current is None:
        return None
    schema = with_new_fields(current.schema, values, names)
    if schema == current.schema:
        return current  # another run added them first: read with its version
    reason = f"new field(s) {', '.join(names)} in {source}"
    try:
        return record(store, schema, reason, (source,))
    except FileExistsError:  # another process stored the next version first
        return latest(store)
