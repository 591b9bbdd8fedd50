"""JSON at the source: decode Kafka values into typed columns with Arrow's C++ JSON reader.

Spark's usual path (``from_json`` over string values) parses on the JVM after Python
has already handed the bytes over; decoding here, while the batch is still Arrow, skips
that round trip. Results equal ``from_json`` on valid input. Arrow is stricter on some
invalid input (a number where the schema says string, or text after the object, are
errors here, while ``from_json`` turns the number into a string and ignores what follows
the first object): such values get a ``json_error`` and a null ``json`` column, so they
land in quarantine rather than silently changing shape. Arrow's reader does not check
UTF-8 inside strings (its column would be invalid, and DuckDB and PostgreSQL refuse what
is written from it), so a value that is not UTF-8 is an error here too.
"""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

_EMPTY = b"{}"


def decode_json_values(
    values: list[bytes | None], struct_type: pa.StructType, array: pa.BinaryArray | None = None
) -> tuple[pa.StructArray, pa.StringArray]:
    """Decode each value as one JSON object: ``(parsed, error)``, aligned with ``values``.

    A null or blank value decodes to null without error, and ``null`` to an object of
    nulls (as ``from_json`` does); a value that is not one object of the schema's shape
    decodes to null with the reason. ``array``: the same values as Arrow, when the
    caller has built it.

    Arrow reads objects, not lines, so rows line up with values only if each value
    holds one object: ``{"a":1}{"a":2}`` beside a blank value, or ``{"a":1} {"a"``
    beside ``:2}``, would otherwise decode as two valid rows. Each line decoded here
    starts with ``{`` and ends with ``}``: it holds at least one object and cannot run
    into the next line (after a closed object a ``{`` is valid only at the top level,
    and a newline inside a string is an error), so with as many rows as lines, each
    line is exactly one object.
    """
    binary = pa.array(values, pa.binary()) if array is None else array
    fast = _decode_clean(values, binary, struct_type)
    if fast is not None:
        return fast
    prepared: list[bytes] = []
    blank: list[bool] = []
    errors: list[str | None] = []
    for value in values:
        line = value.strip() if value is not None else b""
        error = _not_utf8(value or b"")  # the byte counted in the value as sent
        if error is None and line == b"null":  # from_json's object of nulls; pyarrow 26
            line = _EMPTY  # crashes on a first row of null (segmentation fault in the worker)
        elif error is None and line and (line[:1] != b"{" or line[-1:] != b"}"):
            # one object only if alone
            error = _error_alone(line, struct_type)
        blank.append(not line)
        errors.append(error)
        prepared.append(line if line and error is None else _EMPTY)
    try:
        table = _parse(prepared, struct_type)
    except pa.ArrowInvalid:
        for index, line in enumerate(prepared):
            error = _error_alone(line, struct_type)
            if error is not None:
                errors[index] = error
                prepared[index] = _EMPTY
        table = _parse(prepared, struct_type)
    mask = pa.array([b or e is not None for b, e in zip(blank, errors, strict=True)], pa.bool_())
    columns = [table.column(field.name).combine_chunks() for field in struct_type]
    parsed = pa.StructArray.from_arrays(columns, fields=list(struct_type), mask=mask)
    return parsed, pa.array(errors, pa.string())


def _decode_clean(
    values: list[bytes | None], array: pa.BinaryArray, struct_type: pa.StructType
) -> tuple[pa.StructArray, pa.StringArray] | None:
    """The common case in one pass, with no per-value Python work: every value present,
    ``{`` first and ``}`` last, and valid. None when any is not (the caller then goes
    value by value)."""
    if array.null_count or not len(array):
        return None
    shaped = pc.and_(pc.starts_with(array, "{"), pc.ends_with(array, "}"))
    if not pc.all(shaped).as_py():
        return None
    try:
        array.cast(pa.string())  # Arrow's JSON reader takes invalid UTF-8 into its strings
    except pa.ArrowInvalid:
        return None
    data = b"\n".join(values)  # type: ignore[arg-type]  # no None, checked above
    try:
        table = _parse_data(data, len(values), struct_type)
    except pa.ArrowInvalid:  # a broken value: found and reported value by value
        return None
    columns = [table.column(field.name).combine_chunks() for field in struct_type]
    parsed = pa.StructArray.from_arrays(columns, fields=list(struct_type))
    return parsed, pa.nulls(len(values), pa.string())


def _not_utf8(line: bytes) -> str | None:
    """Why ``line`` is not UTF-8 (where it stops being), or None if it is."""
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"invalid JSON value: not UTF-8 at byte {exc.start}"
    return None


def _error_alone(line: bytes, struct_type: pa.StructType) -> str | None:
    """Why ``line`` is not one JSON object of the shape, or None if it is."""
    try:
        _parse_data(line, 1, struct_type)
    except pa.ArrowInvalid as exc:
        return "invalid JSON value: " + str(exc).split(" in row ")[0]
    return None


def _parse(lines: list[bytes], struct_type: pa.StructType) -> pa.Table:
    return _parse_data(b"\n".join(lines), len(lines), struct_type)


def _parse_data(data: bytes, rows: int, struct_type: pa.StructType) -> pa.Table:
    target = pa.schema(list(struct_type))
    readable = pa.schema([field.with_type(_readable(field.type)) for field in target])
    table = pa_json.read_json(
        io.BytesIO(data),
        # One block, read on this thread: Spark runs a Python worker per core already,
        # so Arrow's thread pool has no idle core to use.
        read_options=pa_json.ReadOptions(block_size=max(len(data) + 1, 1 << 16), use_threads=False),
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
