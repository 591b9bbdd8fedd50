"""Why a JSON line did not parse into its record: the field whose value does not fit its
type, or the line itself not being JSON.

Spark's JSON parsing (the reader and ``from_json``) marks a whole record corrupt when one
value does not convert (``"delay": "n/a"`` for an int, a timestamp off its format), which
reads as "malformed JSON" although the line is well formed. :func:`rejected_json_reason`
tells the two apart for the few rows marked corrupt, without costing the others: it is
computed inside a ``CASE`` on the corrupt mark.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DataType,
    DateType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    VariantType,
)

MALFORMED_LINE = "malformed JSON line"
MALFORMED_VALUE = "malformed JSON value"
NOT_UTF8 = "not valid UTF-8 (raw: invalid bytes as U+FFFD)"
_CORRUPT = "_corrupt_record"
CORRUPT_MARK = "_streamsmith_corrupt"  # a name no record field takes
_MEMBERS = MapType(StringType(), VariantType()).simpleString()
# The option giving each temporal type's format, and what Spark expects without it.
_FORMATS: dict[type[DataType], tuple[str, str]] = {
    TimestampType: ("timestampFormat", "ISO 8601, e.g. 2001-01-06T15:01:00"),
    TimestampNTZType: ("timestampNTZFormat", "ISO 8601, e.g. 2001-01-06T15:01:00"),
    DateType: ("dateFormat", "yyyy-MM-dd"),
}


def rejected_json_reason(
    line: Column,
    schema: StructType,
    options: Mapping[str, str] | None = None,
    malformed: str = MALFORMED_LINE,
) -> Column:
    """Why ``line``, marked corrupt when parsed with ``schema`` and ``options``, was:
    bytes that are not UTF-8, else the first field (in schema order) whose value does
    not convert, as ``field delay: "n/a" is not an int``, else ``malformed JSON line``.
    Each field is judged by parsing the line with that field alone, so its verdict is
    Spark's own."""
    given = {key.lower(): value for key, value in (options or {}).items()}
    members = F.from_json(line, _MEMBERS)
    field_reasons = [
        F.when(_field_fails(line, field, options), _field_reason(members, field, given))
        for field in schema.fields
    ]
    return (
        F.when(~F.is_valid_utf8(line), F.lit(NOT_UTF8))  # Jackson reads the bytes
        .when(members.isNull(), F.lit(malformed))
        .otherwise(F.coalesce(*field_reasons, F.lit(malformed)))
    )


def with_corrupt_mark(
    schema: StructType, options: Mapping[str, str] | None
) -> tuple[StructType, dict[str, str]]:
    """``schema`` and ``from_json`` options that mark a record that does not parse whole
    (not JSON, not an object, a value of the wrong type) in :data:`CORRUPT_MARK`, where
    Spark's default would give it null fields, as if they were missing."""
    marked = StructType([*schema.fields, StructField(CORRUPT_MARK, StringType())])
    parse = {**(options or {}), "mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_MARK}
    return marked, parse


def _field_fails(line: Column, field: StructField, options: Mapping[str, str] | None) -> Column:
    alone = StructType([field, StructField(_CORRUPT, StringType())])
    parse = {**(options or {}), "mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}
    return F.from_json(line, alone, parse)[_CORRUPT].isNotNull()


def _field_reason(members: Column, field: StructField, options: Mapping[str, str]) -> Column:
    kind = field.dataType.simpleString()
    article = "an" if kind[0] in "aeiou" else "a"
    said = f" is not {article} {kind}"
    known = _FORMATS.get(type(field.dataType))
    if known is not None:
        option, default = known
        given = options.get(option.lower())
        said += f" (format {given})" if given else f" ({default}; set options.{option})"
    value = F.to_json(members[field.name])
    return F.concat(F.lit(f"field {field.name}: "), value, F.lit(said))
