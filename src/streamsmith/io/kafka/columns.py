"""The columns a Kafka read hands Spark (the source's ``columns`` option).

Spark turns every column of every row a Python source yields into an ``UnsafeRow``
before any operator runs, and offers Python sources no column pruning, so the source
prunes itself: streamsmith's runtime finds the columns a query reads in its plan
(``streamsmith.runtime.pruning``) and names them here. The source still decodes every
field of every JSON value (a value with a wrong-typed field the query never reads is
still a ``json_error``), then yields only the Kafka columns and decoded fields named,
and ``json_error`` always.

Names: the Kafka columns (``key``, ``value``, ``topic``, ``partition``, ``offset``,
``timestamp``, ``timestampType``, ``headers``), ``json_error``, and ``json.<field>`` for
a top-level field of the decoded value; comma-separated.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa

KAFKA_COLUMNS = (
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestampType",
    "headers",
)
JSON = "json"
JSON_ERROR = "json_error"
FIELD_PREFIX = f"{JSON}."


class ColumnsError(ValueError):
    """A ``columns`` option naming something the source does not yield."""


@dataclass(frozen=True)
class Columns:
    """What a pruned read yields: Kafka columns (in the source's order) and fields of the
    decoded value (in the value schema's order, None: no ``json`` column at all)."""

    kafka: tuple[str, ...]
    fields: tuple[str, ...] | None

    def describe(self) -> str:
        """The option's text for these columns."""
        names = [*self.kafka, *(f"{FIELD_PREFIX}{name}" for name in self.fields or ())]
        return ",".join([*names, JSON_ERROR] if self.fields is not None else names)


def parse_columns(
    text: str, value_fields: Sequence[str] | None, *, headers: bool = False
) -> Columns:
    """The columns ``text`` names, checked against what the source can yield:
    ``value_fields`` are the decoded value's fields (None: values are not decoded)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise ColumnsError("option columns names no column: leave it out to read them all")
    kafka_names = {name.lower(): name for name in KAFKA_COLUMNS if headers or name != "headers"}
    kafka: set[str] = set()
    fields: set[str] = set()
    for name in names:
        if name.startswith(FIELD_PREFIX) and value_fields is not None:
            field = name[len(FIELD_PREFIX) :]
            if field not in value_fields:
                raise ColumnsError(
                    f"option columns names {name}, but the value schema has no field {field!r} "
                    f"(its fields: {', '.join(value_fields)})"
                )
            fields.add(field)
        elif name.lower() in kafka_names:
            kafka.add(kafka_names[name.lower()])
        elif name != JSON_ERROR or value_fields is None:
            known = [*kafka_names.values(), *([JSON_ERROR, "json.<field>"] if value_fields else [])]
            raise ColumnsError(f"option columns names {name!r}: not one of {', '.join(known)}")
    kept_fields = None
    if value_fields is not None:
        # Spark takes no empty struct: a read of no field still yields the first.
        kept_fields = tuple(f for f in value_fields if f in fields) or tuple(value_fields[:1])
    return Columns(tuple(c for c in KAFKA_COLUMNS if c in kafka), kept_fields)


def pruned_batch(batch: pa.RecordBatch, columns: Columns) -> pa.RecordBatch:
    """``batch`` (every column the source makes) cut to ``columns``."""
    arrays = [batch.column(name) for name in columns.kafka]
    names = list(columns.kafka)
    if columns.fields is not None:
        decoded = batch.column(JSON)
        assert isinstance(decoded, pa.StructArray)
        kind = decoded.type
        kept = [kind.field(name) for name in columns.fields]
        children = [decoded.field(name) for name in columns.fields]
        mask = decoded.is_null() if decoded.null_count else None
        arrays.append(pa.StructArray.from_arrays(children, fields=kept, mask=mask))
        arrays.append(batch.column(JSON_ERROR))
        names.extend([JSON, JSON_ERROR])
    return pa.RecordBatch.from_arrays(arrays, names=names)


def all_columns(value_fields: Iterable[str] | None, *, headers: bool = False) -> Columns:
    """Every column a read yields without the option."""
    kafka = tuple(c for c in KAFKA_COLUMNS if headers or c != "headers")
    return Columns(kafka, None if value_fields is None else tuple(value_fields))
