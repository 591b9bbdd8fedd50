"""A record schema inferred from a sample of JSON records, without Spark.

``schema: infer`` on a source runs this once over a bounded sample of its input; the
result is stored as the source's schema version 0 and never re-inferred silently (see
``streamsmith.io.schema_store``). Types are the narrowest that hold every sampled value:
``boolean``, ``bigint`` (widened to ``double`` when a decimal shows up), ``double``,
``timestamp`` for ISO-8601 date-times, ``string``, and ``struct``/``array`` for nested
values. A field seen only as JSON null is a ``string``. Two values that no type holds
both (a number and an object, say) are an error naming the field and where each was
seen: a schema must be decided by the user (``schema_hints``), not guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

# An ISO-8601 date-time as Spark's JSON reader takes it for a timestamp field.
_TIMESTAMP = re.compile(
    r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?$"
)


MAX_NESTING = 100
"""How deep a sampled record may nest (objects and arrays): a deeper one is left out of
the sample as malformed, as no schema is that deep and following it would exhaust
Python's recursion limit (a 10,000-level record crashed inference)."""


def nests_deeper_than(value: Any, limit: int = MAX_NESTING) -> bool:
    """Whether ``value`` (parsed JSON) nests objects and arrays more than ``limit`` deep;
    walked without recursion, so any depth is answered."""
    pending = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, Mapping | list):
            if depth >= limit:
                return True
            children = item.values() if isinstance(item, Mapping) else item
            pending.extend((child, depth + 1) for child in children)
    return False


class InferenceError(ValueError):
    """The sample cannot decide a schema; the message names the field and the records."""


@dataclass
class _Seen:
    """What one field held across the sample: a type, and where it was first seen so."""

    kind: DataType | None = None
    where: str = ""
    fields: dict[str, _Seen] = field(default_factory=dict)  # for a struct
    element: _Seen | None = None  # for an array


def infer_schema(records: Iterable[tuple[str, Any]], hints: StructType | None = None) -> StructType:
    """The schema of ``records`` (``(where, parsed JSON)`` pairs; ``where`` names the
    file and line, for errors), with ``hints`` deciding the type of the fields they
    name. Fields keep the order in which they were first seen. A record nested deeper
    than MAX_NESTING is left out, as malformed (the run quarantines what it cannot read)."""
    root = _Seen(StructType(), "")
    count = 0
    for where, record in records:
        if nests_deeper_than(record):
            continue
        count += 1
        if not isinstance(record, Mapping):
            raise InferenceError(
                f"{where}: a record must be a JSON object, not {_json_kind(record)}"
            )
        _merge_object(root, record, where, "")
    if count == 0:
        raise InferenceError("no records to infer a schema from")
    schema = _type_of(root)
    assert isinstance(schema, StructType)
    return apply_hints(schema, hints) if hints is not None else schema


def apply_hints(schema: StructType, hints: StructType) -> StructType:
    """``schema`` with each hinted field's type replaced (a hinted field the sample never
    held is added at the end)."""
    hinted = {f.name: f for f in hints.fields}
    fields = [hinted.pop(f.name, f) for f in schema.fields]
    return StructType([*fields, *hinted.values()])


def _merge_object(seen: _Seen, record: Mapping[str, Any], where: str, path: str) -> None:
    for name, value in record.items():
        child = seen.fields.setdefault(str(name), _Seen())
        _merge(child, value, where, f"{path}{name}")


def _merge(seen: _Seen, value: Any, where: str, path: str) -> None:
    if value is None:
        return
    if isinstance(value, Mapping):
        _widen(seen, StructType(), where, path)
        _merge_object(seen, value, where, f"{path}.")
        return
    if isinstance(value, list):
        _widen(seen, ArrayType(StringType()), where, path)
        seen.element = seen.element or _Seen()
        for item in value:
            _merge(seen.element, item, where, f"{path}[]")
        return
    _widen(seen, _atomic(value), where, path)


def _atomic(value: Any) -> DataType:
    if isinstance(value, bool):
        return BooleanType()
    if isinstance(value, int):
        return LongType()
    if isinstance(value, float):
        return DoubleType()
    if isinstance(value, str) and _TIMESTAMP.match(value):
        return TimestampType()
    return StringType()


def _widen(seen: _Seen, kind: DataType, where: str, path: str) -> None:
    """Keep the narrowest type holding both what was seen and ``kind``."""
    before = seen.kind
    if before is None or before == kind:
        seen.kind, seen.where = kind, seen.where or where
        return
    pair = {type(before), type(kind)}
    if pair == {LongType, DoubleType}:
        seen.kind = DoubleType()
    elif pair == {TimestampType, StringType}:
        seen.kind = StringType()  # some values are not date-times: keep the text
    else:
        top = re.split(r"[.\[]", path, maxsplit=1)[0]
        raise InferenceError(
            f"field {path!r} holds {_name(before)} in {seen.where} but {_name(kind)} in "
            f'{where}: give its type in schema_hints (e.g. "{top} string")'
        )


def _type_of(seen: _Seen) -> DataType:
    if isinstance(seen.kind, StructType):
        return StructType(
            [StructField(name, _type_of(child)) for name, child in seen.fields.items()]
        )
    if isinstance(seen.kind, ArrayType):
        element = _type_of(seen.element) if seen.element is not None else StringType()
        return ArrayType(element)
    return seen.kind or StringType()


def _name(kind: DataType) -> str:
    if isinstance(kind, StructType):
        return "an object"
    if isinstance(kind, ArrayType):
        return "an array"
    return f"a {kind.simpleString()}"


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    return "null" if value is None else f"a {type(value).__name__}"


def with_new_fields(
    schema: StructType, record: Mapping[str, Any], paths: Iterable[str]
) -> StructType:
    """``schema`` with the fields at ``paths`` added, typed from their values in
    ``record``. A path is dotted for nested structs, with ``[]`` after an array of
    structs whose elements gained a member (``items[].color``: typed from every element
    holding it). A value no single type holds (an array of mixed kinds) is kept as a
    ``string``. Fields already there keep their type."""
    result = schema
    for path in paths:
        parts = path.split(".")
        try:
            kind = _type_of_values(_values_at(record, parts), path)
        except InferenceError:
            kind = StringType()
        result = _added(result, parts, kind)
    return result


def _values_at(value: Any, parts: list[str]) -> list[Any]:
    """The values at the path ``parts`` in ``value``: one per element after ``name[]``."""
    if not parts:
        return [value]
    head, rest = parts[0], parts[1:]
    if not isinstance(value, Mapping):
        return []
    if head.endswith("[]"):
        items = value.get(head[:-2])
        return (
            [v for item in items for v in _values_at(item, rest)] if isinstance(items, list) else []
        )
    return _values_at(value.get(head), rest)


def _type_of_values(values: list[Any], where: str) -> DataType:
    seen = _Seen()
    for value in values:
        _merge(seen, value, where, where)
    return _type_of(seen)


def only_grows(old: DataType, new: DataType) -> bool:
    """Whether ``new`` is ``old`` or ``old`` with members added to its structs, at any
    depth (inside arrays too): what a schema version adds, which Parquet readers take
    (older files read the new members as null)."""
    if isinstance(old, StructType) and isinstance(new, StructType):
        grown = {f.name: f.dataType for f in new.fields}
        return all(f.name in grown and only_grows(f.dataType, grown[f.name]) for f in old.fields)
    if isinstance(old, ArrayType) and isinstance(new, ArrayType):
        return only_grows(old.elementType, new.elementType)
    return old == new


def _added(schema: StructType, parts: list[str], kind: DataType) -> StructType:
    """``schema`` with ``kind`` at the path ``parts``, creating the structs on the way."""
    head, rest = parts[0], parts[1:]
    name = head.removesuffix("[]")
    fields = list(schema.fields)
    for index, existing in enumerate(fields):
        if existing.name != name:
            continue
        inner = existing.dataType
        if rest and head.endswith("[]") and isinstance(inner, ArrayType):
            element = inner.elementType
            if isinstance(element, StructType):
                grown = ArrayType(_added(element, rest, kind), inner.containsNull)
                fields[index] = StructField(name, grown, existing.nullable)
        elif rest and isinstance(inner, StructType):
            fields[index] = StructField(name, _added(inner, rest, kind), existing.nullable)
        return StructType(fields)  # already there: keep its type
    added: DataType = kind
    for part in reversed(rest):
        added = StructType([StructField(part.removesuffix("[]"), added)])
    return StructType([*fields, StructField(name, added)])
