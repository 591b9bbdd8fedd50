"""An Avro schema (an ``.avsc`` document, parsed JSON) as the Spark record schema that
``from_avro`` decodes it to, worked out without Spark so a spec is checked before a JVM
starts.

The rules are spark-avro's (``SchemaConverters.toSqlType``): records are structs, enums
and ``uuid`` strings, ``fixed`` and ``bytes`` binary, a union with ``null`` its other
branch (nullable), any other union a struct of ``member0``, ``member1``, ...; logical
types ``date``, ``timestamp-millis/micros`` (timestamp), ``local-timestamp-millis/micros``
(timestamp_ntz) and ``decimal``. ``tests/streaming/test_avro_values.py`` holds the two
conversions together.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)


class AvroSchemaError(ValueError):
    """An Avro schema this converter (and so ``from_avro``) cannot take; says where."""


_PRIMITIVES: dict[str, DataType] = {
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
}
_LOGICAL: dict[str, DataType] = {
    "date": DateType(),
    "timestamp-millis": TimestampType(),
    "timestamp-micros": TimestampType(),
    "local-timestamp-millis": TimestampNTZType(),
    "local-timestamp-micros": TimestampNTZType(),
}


def record_struct(schema: Any) -> StructType:
    """The struct ``from_avro`` yields for a value of the top-level record ``schema``."""
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise AvroSchemaError('the value schema must be an Avro record ("type": "record")')
    converted = _converted(schema, {}, "")
    assert isinstance(converted, StructType)
    return converted


def _converted(schema: Any, named: dict[str, DataType], at: str) -> DataType:
    """``schema`` as a Spark type; ``named``: the named types defined so far (by full
    name and by short name), for references."""
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        if schema in named:
            return _checked(named[schema], at)
        raise AvroSchemaError(f"{at or 'the schema'}: unknown type {schema!r}")
    if isinstance(schema, list):
        return _union(schema, named, at)
    if not isinstance(schema, dict) or "type" not in schema:
        raise AvroSchemaError(f"{at or 'the schema'}: not an Avro type: {schema!r}")
    kind, logical = schema["type"], schema.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        return DecimalType(int(schema["precision"]), int(schema.get("scale", 0)))
    if logical in _LOGICAL and kind in ("int", "long"):
        return _LOGICAL[logical]
    if kind == "record":
        return _record(schema, named, at)
    if kind in ("enum", "fixed"):
        found: DataType = StringType() if kind == "enum" else BinaryType()
        _name(schema, named, found, at)
        return found
    if kind == "array":
        return ArrayType(
            _converted(schema.get("items"), named, f"{at}[]"), _nullable(schema["items"])
        )
    if kind == "map":
        values = schema.get("values")
        return MapType(StringType(), _converted(values, named, f"{at}{{}}"), _nullable(values))
    return _converted(kind, named, at)  # {"type": "string", ...}: a primitive, annotated


def _record(schema: dict[str, Any], named: dict[str, DataType], at: str) -> StructType:
    fields = schema.get("fields")
    if not isinstance(fields, list):
        raise AvroSchemaError(f"{at or 'the record'}: a record needs a list of fields")
    struct = StructType()
    # A record referring to itself cannot be a Spark type (spark-avro refuses it too).
    _name(schema, named, None, at)
    for field in fields:
        if not isinstance(field, dict) or not isinstance(field.get("name"), str):
            raise AvroSchemaError(f"{at or 'the record'}: every field needs a name and a type")
        where = f"{at}.{field['name']}" if at else field["name"]
        kind = _converted(field.get("type"), named, where)
        struct.add(field["name"], kind, _nullable(field.get("type")))
    _name(schema, named, struct, at)
    return struct


def _name(
    schema: dict[str, Any], named: dict[str, DataType], kind: DataType | None, at: str
) -> None:
    """Record a named type under its short and full names (None: being defined, so a
    reference to it is recursive)."""
    name = schema.get("name")
    if not isinstance(name, str):
        raise AvroSchemaError(f"{at or 'the schema'}: a {schema['type']} needs a name")
    space = schema.get("namespace")
    for key in (name, f"{space}.{name}" if space else name):
        if kind is None:
            named[key] = _Recursive(key, at)
        else:
            named[key] = kind


class _Recursive(DataType):
    """A reference to a record still being defined: refused where it is used."""

    def __init__(self, name: str, at: str) -> None:
        self.name, self.at = name, at

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Recursive) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


def _union(branches: list[Any], named: dict[str, DataType], at: str) -> DataType:
    others = [branch for branch in branches if branch != "null"]
    if not others:
        raise AvroSchemaError(f"{at or 'the schema'}: a union of null alone")
    if len(others) == 1:
        return _converted(others[0], named, at)
    kinds = {_converted(branch, named, at) for branch in others}
    if kinds <= {IntegerType(), LongType()}:
        return LongType()  # spark-avro widens these two, as it does float and double
    if kinds <= {FloatType(), DoubleType()}:
        return DoubleType()
    members = [
        StructField(f"member{i}", _converted(b, named, at), True) for i, b in enumerate(others)
    ]
    return StructType(members)


def _checked(kind: DataType, at: str) -> DataType:
    if isinstance(kind, _Recursive):
        raise AvroSchemaError(f"{at}: refers to record {kind.name} inside itself (recursive)")
    return kind


def _nullable(schema: Any) -> bool:
    """Whether a value of ``schema`` may be null: a union holding ``null``, or null."""
    return (isinstance(schema, list) and "null" in schema) or schema == "null"
