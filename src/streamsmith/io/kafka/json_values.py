"""JSON at the source: decode Kafka values into typed columns with Arrow's C++ JSON reader.

Spark's usual path (``from_json`` over string values) parses on the JVM after Python
has already handed the bytes over; decoding here, while the batch is still Arrow, skips
that round trip. Results equal ``from_json`` on valid input. Arrow is stricter on some
invalid input (a number where the schema says string is an error here, while
``from_json`` turns it into a string): such values get a ``json_error`` and a null
``json`` column, so they land in quarantine rather than silently changing shape.
"""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.json as pa_json

_EMPTY = b"{}"


def decode_json_values(
    values: list[bytes | None], struct_type: pa.StructType
) -> tuple[pa.StructArray, pa.StringArray]:
    """Decode each value as one JSON object: ``(parsed, error)``, aligned with ``values``.

    A null or blank value decodes to null without error (as ``from_json`` does); a value
    that is not an object of the schema's shape decodes to null with the reason.
    """
    fast = _decode_clean(values, struct_type)
    if fast is not None:
        return fast
    lines = [_one_line(value) for value in values]
    blank = [line is None for line in lines]
    prepared = [line if line is not None else _EMPTY for line in lines]
    errors: list[str | None] = [None] * len(prepared)
    try:
        table = _parse(prepared, struct_type)
    except pa.ArrowInvalid:
        for index, line in enumerate(prepared):
            try:
                _parse([line], struct_type)
            except pa.ArrowInvalid as exc:
                errors[index] = "invalid JSON value: " + str(exc).split(" in row ")[0]
                prepared[index] = _EMPTY
        table = _parse(prepared, struct_type)
    mask = pa.array([b or e is not None for b, e in zip(blank, errors, strict=True)], pa.bool_())
    columns = [table.column(field.name).combine_chunks() for field in struct_type]
    parsed = pa.StructArray.from_arrays(columns, fields=list(struct_type), mask=mask)
    return parsed, pa.array(errors, pa.string())


def _decode_clean(
    values: list[bytes | None], struct_type: pa.StructType
) -> tuple[pa.StructArray, pa.StringArray] | None:
    """The common case in one pass, with no per-value Python work: every value present,
    on one line, and valid. None when any is not (the caller then goes value by value)."""
    if None in values:
        return None
    data = b"\n".join(values)  # type: ignore[arg-type]  # no None, checked above
    if data.count(b"\n") != len(values) - 1 or b"\r" in data:
        return None
    try:
        table = _parse_data(data, len(values), struct_type)
    except pa.ArrowInvalid:  # a blank or broken value: found and reported value by value
        return None
    columns = [table.column(field.name).combine_chunks() for field in struct_type]
    parsed = pa.StructArray.from_arrays(columns, fields=list(struct_type))
    return parsed, pa.nulls(len(values), pa.string())


def _one_line(value: bytes | None) -> bytes | None:
    """The value on a single line (raw newlines in valid JSON are only whitespace)."""
    if value is None or not value.strip():
        return None
    return value.replace(b"\n", b" ").replace(b"\r", b" ")


def _parse(lines: list[bytes], struct_type: pa.StructType) -> pa.Table:
    return _parse_data(b"\n".join(lines), len(lines), struct_type)


def _parse_data(data: bytes, rows: int, struct_type: pa.StructType) -> pa.Table:
    target = pa.schema(list(struct_type))
    readable = pa.schema([field.with_type(_readable(field.type)) for field in target])
    table = pa_json.read_json(
        io.BytesIO(data),
        read_options=pa_json.ReadOptions(block_size=max(len(data) + 1, 1 << 16)),
        parse_options=pa_json.ParseOptions(
            explicit_schema=readable, unexpected_field_behavior="ignore"
        ),
    )
    if table.num_rows != rows:
        raise pa.ArrowInvalid(f"expected {rows} JSON values, decoded {table.num_rows}")
    return table if readable == target else table.cast(target)


def _readable(kind: pa.DataType) -> pa.DataType:
    """The type to read a column as: Arrow's JSON reader takes dates only as strings."""
    if pa.types.is_date(kind):
        return pa.string()
    if pa.types.is_struct(kind):
        return pa.struct([field.with_type(_readable(field.type)) for field in kind])
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.list_(kind.value_field.with_type(_readable(kind.value_type)))
    return kind


def unsupported_fields(struct_type: pa.StructType, prefix: str = "") -> list[str]:
    """Fields Arrow's JSON reader cannot produce (maps), by dotted name."""
    found = []
    for field in struct_type:
        name = f"{prefix}{field.name}"
        kind = field.type
        while pa.types.is_list(kind) or pa.types.is_large_list(kind):
            kind = kind.value_type
        if pa.types.is_map(kind):
            found.append(name)
        elif pa.types.is_struct(kind):
            found.extend(unsupported_fields(kind, f"{name}."))
    return found
