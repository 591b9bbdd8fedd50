"""A record schema written as DDL (``"user string, ts timestamp, amount decimal(12,2)"``),
parsed without Spark, so a spec is checked before a JVM starts.

PySpark's own parser (``DataType.fromDDL``) asks the running JVM. This one reads the
types a record schema uses: the atomic types, ``decimal(p,s)``, ``array<...>``,
``map<...,...>`` and ``struct<name: type, ...>``, with back-quoted names and
``NOT NULL``.
"""

from __future__ import annotations

import re

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

_ATOMIC: dict[str, DataType] = {
    "string": StringType(),
    "boolean": BooleanType(),
    "tinyint": ByteType(),
    "byte": ByteType(),
    "smallint": ShortType(),
    "short": ShortType(),
    "int": IntegerType(),
    "integer": IntegerType(),
    "bigint": LongType(),
    "long": LongType(),
    "float": FloatType(),
    "real": FloatType(),
    "double": DoubleType(),
    "date": DateType(),
    "timestamp": TimestampType(),
    "timestamp_ltz": TimestampType(),
    "timestamp_ntz": TimestampNTZType(),
    "binary": BinaryType(),
}
_TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|[A-Za-z_][A-Za-z0-9_]*|\d+|[<>(),:])")


class DDLError(ValueError):
    """A schema that does not parse; the message says where and what was expected."""


def parse_schema(ddl: str) -> StructType:
    """The record schema ``ddl`` describes: comma-separated ``name type`` fields."""
    parser = _Parser(ddl)
    fields = parser.fields(end=None)
    if not fields:
        raise DDLError("the schema has no fields: write them as 'name type, name type'")
    return StructType(fields)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[str] = []
        position = 0
        while position < len(text):
            if text[position:].strip() == "":
                break
            match = _TOKEN.match(text, position)
            if match is None:
                raise DDLError(f"unexpected {text[position:].strip()[:12]!r} in schema {text!r}")
            self.tokens.append(match.group(1))
            position = match.end()
        self.index = 0

    def peek(self) -> str | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token.lower() != expected):
            wanted = repr(expected) if expected else "more"
            raise DDLError(
                f"expected {wanted} but found {token or 'the end'} in schema {self.text!r}"
            )
        self.index += 1
        return token

    def fields(self, end: str | None) -> list[StructField]:
        fields: list[StructField] = []
        seen: set[str] = set()
        while self.peek() is not None and self.peek() != end:
            name = self.name()
            if self.peek() == ":":
                self.take(":")
            data_type = self.type()
            nullable = True
            if (self.peek() or "").lower() == "not":
                self.take("not")
                self.take("null")
                nullable = False
            if name.lower() in seen:
                raise DDLError(f"field {name!r} appears twice in schema {self.text!r}")
            seen.add(name.lower())
            fields.append(StructField(name, data_type, nullable))
            if self.peek() == "," or self.peek() != end:
                self.take(",")
        return fields

    def name(self) -> str:
        token = self.take()
        if token.startswith("`"):
            return token[1:-1].replace("``", "`")
        if not re.match(r"[A-Za-z_]", token):
            raise DDLError(f"expected a field name but found {token!r} in schema {self.text!r}")
        return token

    def type(self) -> DataType:
        word = self.take().lower()
        if word in _ATOMIC:
            return _ATOMIC[word]
        if word in ("varchar", "char"):
            self.take("(")
            self.take()
            self.take(")")
            return StringType()
        if word in ("decimal", "dec", "numeric"):
            precision, scale = 10, 0
            if self.peek() == "(":
                self.take("(")
                precision = int(self.take())
                if self.peek() == ",":
                    self.take(",")
                    scale = int(self.take())
                self.take(")")
            return DecimalType(precision, scale)
        if word == "array":
            self.take("<")
            element = self.type()
            self.take(">")
            return ArrayType(element)
        if word == "map":
            self.take("<")
            key = self.type()
            self.take(",")
            value = self.type()
            self.take(">")
            return MapType(key, value)
        if word == "struct":
            self.take("<")
            fields = self.fields(end=">")
            self.take(">")
            return StructType(fields)
        known = ", ".join(sorted({*_ATOMIC, "decimal(p,s)", "array<t>", "map<k,v>", "struct<...>"}))
        raise DDLError(f"unknown type {word!r} in schema {self.text!r} (types: {known})")
