"""Protobuf values on Kafka, decoded and encoded in Python with the protobuf runtime
(``mapInArrow``): Spark's ``spark-protobuf`` jar is not served by the Maven registry
streamsmith installs from, so ``from_protobuf`` is not on the classpath.

The schema is a FileDescriptorSet and a message name. A value that does not parse (or
is not framed as ``value_wire_format`` says, or carries another schema id or message)
is never dropped and never fails the query: it keeps null fields and a reason in
``_read_error``, so it goes to the flow's quarantine with its raw bytes (base64, as for
Avro). Protobuf keeps fields it does not know as unknown fields, so a value written with
a newer schema parses: that is Protobuf's compatibility rule, not a malformed value.

The Confluent wire format puts a magic byte 0, the schema's 4-byte id (big-endian) and
the message's indexes in its file (zigzag varints: their count, then each; the first
message, ``[0]``, is the single byte 0) before the message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any

import pyarrow as pa
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from streamsmith.errors import UserError
from streamsmith.io.avro_values import SINK_COLUMNS, confluent_header
from streamsmith.schemas.protobuf import (
    TIMESTAMP,
    ProtobufSchemaError,
    find_message,
    is_map,
    message_struct,
)
from streamsmith.transforms.quarantine import READ_ERROR

_F = FieldDescriptor
_HEADER = 5
_LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class ProtobufValueSchema:
    """A ``.desc`` file (a serialized FileDescriptorSet), the message its values hold
    and the record schema they decode to."""

    path: Path
    data: bytes
    message: str
    struct: StructType


def load_protobuf_schema(path: Path, message: str | None, where: str) -> ProtobufValueSchema:
    """The message ``message`` of the descriptor set in ``path``; a one-line error naming
    the file (and ``where`` the spec names it) if it cannot be read or lacks it."""
    if not message:
        raise UserError(
            f"{where}: value_format: protobuf needs value_message, the full name of the "
            f"values' message in {path.name} (e.g. shop.Click)"
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(
            f"{where}: cannot read the Protobuf descriptor set {path}: {exc.strerror or exc}"
        ) from None
    try:
        struct = message_struct(find_message(data, message))
    except ProtobufSchemaError as exc:
        raise UserError(f"{where}: {path} (value_message {message}): {exc}") from None
    return ProtobufValueSchema(path, data, message, struct)


def message_indexes(message: Descriptor) -> list[int]:
    """Where ``message`` is in its file, as the Confluent wire format names it: its
    index among the file's messages, then among each enclosing message's."""
    path: list[int] = []
    while message.containing_type is not None:
        parent = message.containing_type
        path.insert(0, [m.full_name for m in parent.nested_types].index(message.full_name))
        message = parent
    top = [m.full_name for m in message.file.message_types_by_name.values()]
    return [top.index(message.full_name), *path]


def _varint(number: int) -> bytes:
    zigzag, out = number << 1, bytearray()  # indexes are never negative
    while True:
        byte, zigzag = zigzag & 0x7F, zigzag >> 7
        out.append(byte | (0x80 if zigzag else 0))
        if not zigzag:
            return bytes(out)


def indexes_bytes(indexes: list[int]) -> bytes:
    """The message indexes as the Confluent wire format writes them."""
    if indexes == [0]:
        return b"\x00"
    return _varint(len(indexes)) + b"".join(_varint(i) for i in indexes)


def _read_varint(value: bytes, at: int) -> tuple[int, int]:
    number, shift = 0, 0
    while True:
        if at >= len(value) or shift > 63:
            raise ValueError("the message indexes are cut short")
        byte = value[at]
        number |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return (number >> 1) ^ -(number & 1), at


def unframe(
    value: bytes, schema_id: int | None, indexes: list[int], schema: str
) -> tuple[bytes | None, str | None]:
    """The message bytes of a Confluent-framed ``value``, or the reason it is not one
    framed for ``indexes`` (and ``schema_id``, when given) of ``schema``."""
    if len(value) < _HEADER + 1 or value[0] != 0:
        return None, (
            "not in the Confluent wire format (value_wire_format: confluent): no magic byte "
            "0, 4-byte schema id and message indexes before the Protobuf message"
        )
    written = int.from_bytes(value[1:_HEADER], "big")
    if schema_id is not None and written != schema_id:
        return None, (
            f"Protobuf value written with schema id {written}, not {schema_id} "
            f"(value_schema_id) of {schema}"
        )
    try:
        count, at = _read_varint(value, _HEADER)
        found = [0] if count == 0 else []
        for _ in range(count):
            index, at = _read_varint(value, at)
            found.append(index)
    except ValueError as exc:
        return None, f"not in the Confluent wire format (value_wire_format: confluent): {exc}"
    if found != indexes:
        return None, f"Protobuf value written for message indexes {found}, not {indexes}"
    return value[at:], None


# Decoding: a message to the Python values Arrow builds the record's columns from.


def _reader(field: FieldDescriptor) -> Callable[[Any], Any]:
    """A function from a field's value (one element, for a repeated field) to Python."""
    if field.type == _F.TYPE_ENUM:
        names = {v.number: v.name for v in field.enum_type.values}
        return lambda number: names.get(number, str(number))
    if field.type in (_F.TYPE_UINT64, _F.TYPE_FIXED64):
        return _signed_long
    if field.type in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
        if field.message_type.full_name == TIMESTAMP:
            return lambda ts: ts.ToDatetime(tzinfo=UTC)
        return _message_reader(field.message_type)
    return lambda value: value


def _signed_long(value: int) -> int:
    if value > _LONG_MAX:
        raise ValueError(f"{value} is over 2^63 - 1, the largest Spark bigint")
    return value


def _message_reader(message: Descriptor) -> Callable[[Message], dict[str, Any]]:
    readers: list[tuple[str, Callable[[Message], Any]]] = []
    for field in message.fields:
        readers.append((field.name, _field_reader(field)))

    def read(value: Message) -> dict[str, Any]:
        return {name: reader(value) for name, reader in readers}

    return read


def _field_reader(field: FieldDescriptor) -> Callable[[Message], Any]:
    name = field.name
    if is_map(field):
        of = _reader(field.message_type.fields_by_name["value"])
        return lambda m: [(k, of(v)) for k, v in getattr(m, name).items()]
    one = _reader(field)
    if field.is_repeated:
        return lambda m: [one(v) for v in getattr(m, name)]
    if field.has_presence:  # a message field, proto3 optional, proto2: unset is null
        return lambda m: one(getattr(m, name)) if m.HasField(name) else None
    return lambda m: one(getattr(m, name))


def _decode_batches(
    data: bytes, message: str, schema: str, framing: tuple[bool, int | None], out: pa.Schema
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: each batch's columns but the decoded ones, its read
    error (a value's own reason when it had none) and the decoded fields."""
    where = f"{message} ({schema})"

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        descriptor = find_message(data, message)
        cls, read = GetMessageClass(descriptor), _message_reader(descriptor)
        indexes = message_indexes(descriptor)
        fields = [f.name for f in descriptor.fields]
        for batch in batches:
            columns: dict[str, list[Any]] = {name: [] for name in fields}
            errors = batch.column(READ_ERROR).to_pylist()
            for row, value in enumerate(batch.column("value").to_pylist()):
                record, reason = _decoded(value, cls, read, framing, indexes, where)
                errors[row] = errors[row] or reason
                for name in fields:
                    columns[name].append(None if record is None else record[name])
            arrays = [
                pa.array(errors, f.type)
                if f.name == READ_ERROR
                else pa.array(columns[f.name], f.type)
                if f.name in columns
                else batch.column(f.name)
                for f in out
            ]
            yield pa.RecordBatch.from_arrays(arrays, schema=out)

    return decode


def _decoded(
    value: bytes | None,
    cls: type[Message],
    read: Callable[[Message], dict[str, Any]],
    framing: tuple[bool, int | None],
    indexes: list[int],
    where: str,
) -> tuple[dict[str, Any] | None, str | None]:
    """A value's record, or the reason it has none."""
    if value is None:
        return None, None
    payload: bytes | None = value
    confluent, schema_id = framing
    if confluent:
        payload, reason = unframe(value, schema_id, indexes, where)
        if payload is None:
            return None, reason
    try:
        return read(cls.FromString(payload)), None
    except DecodeError as exc:
        return None, f"malformed Protobuf value of {where}: {exc}"
    except ValueError as exc:
        return None, f"Protobuf value of {where} does not fit the record: {exc}"


def decode_protobuf_values(
    frame: DataFrame, schema: ProtobufValueSchema, *, confluent: bool, schema_id: int | None
) -> DataFrame:
    """``frame`` (Kafka records with ``value`` and ``_read_error``) with the decoded
    fields as top-level columns (over any column of the same name), and the reason a
    value did not decode in ``_read_error``."""
    fields = set(schema.struct.fieldNames())
    kept = [f for f in frame.schema.fields if f.name not in fields and f.name != READ_ERROR]
    error = StructField(READ_ERROR, StringType(), True)
    result = StructType([*kept, error, *schema.struct.fields])
    out = pa.schema(
        [pa.field(f.name, to_arrow_type(f.dataType, timezone="UTC")) for f in result.fields]
    )
    decode = _decode_batches(
        schema.data, schema.message, schema.path.name, (confluent, schema_id), out
    )
    return frame.mapInArrow(decode, result)


# Encoding: a sink's rows (as Arrow gives them to Python) to messages.


def _writer(field: FieldDescriptor) -> Callable[[Any], Any]:
    """A function from one Python value of ``field`` to what the message takes."""
    if field.type == _F.TYPE_ENUM:
        numbers = {v.name: v.number for v in field.enum_type.values}
        return lambda name: numbers[name] if isinstance(name, str) else name
    return lambda value: value


def _fill(message: Message, row: dict[str, Any], at: str) -> None:
    """Set ``message``'s fields from ``row``; a value that does not fit raises, naming
    the field."""
    fields = message.DESCRIPTOR.fields_by_name
    for name, value in row.items():
        if value is None:
            continue
        field, where = fields[name], f"{at}{name}"
        try:
            _set(message, field, value, where)
        except (TypeError, ValueError, KeyError, OverflowError) as exc:
            if isinstance(exc, _FieldError):
                raise
            raise _FieldError(f"field {where}: cannot encode {value!r}: {exc}") from None


class _FieldError(ValueError):
    """A row's value that its message field cannot take; names the field."""


def _set(message: Message, field: FieldDescriptor, value: Any, where: str) -> None:
    target = getattr(message, field.name)
    nested = field.type in (_F.TYPE_MESSAGE, _F.TYPE_GROUP)
    if is_map(field):
        entry = field.message_type.fields_by_name["value"]
        pairs = value.items() if isinstance(value, dict) else value
        for key, item in pairs:
            if entry.type == _F.TYPE_MESSAGE:
                _put(target[key], entry, item, f"{where}[{key!r}].")
            else:
                target[key] = _writer(entry)(item)
    elif field.is_repeated and nested:
        for item in value:
            _put(target.add(), field, item, f"{where}[].")
    elif field.is_repeated:
        target.extend(_writer(field)(item) for item in value)
    elif nested:
        _put(target, field, value, f"{where}.")
    else:
        setattr(message, field.name, _writer(field)(value))


def _put(message: Message, field: FieldDescriptor, value: Any, at: str) -> None:
    """Fill a nested message (a Timestamp from a datetime)."""
    if field.message_type.full_name == TIMESTAMP:
        message.FromDatetime(value)
    else:
        message.SetInParent()
        _fill(message, value, at)


def _encode_batches(
    data: bytes, message: str, header: bytes | None, out: pa.Schema
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def encode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        descriptor = find_message(data, message)
        cls = GetMessageClass(descriptor)
        for batch in batches:
            values = []
            for row in batch.select(
                [n for n in batch.schema.names if n not in SINK_COLUMNS]
            ).to_pylist():
                record = cls()
                try:
                    _fill(record, row, "")
                except _FieldError as exc:
                    raise ValueError(
                        f"a row does not encode as Protobuf {message}: {exc}"
                    ) from None
                values.append((header or b"") + record.SerializeToString())
            kept = [batch.column(f.name) for f in out if f.name != "value"]
            yield pa.RecordBatch.from_arrays([*kept, pa.array(values, pa.binary())], schema=out)

    return encode


def encode_protobuf_values(
    frame: DataFrame, schema: ProtobufValueSchema, schema_id: int | None
) -> DataFrame:
    """``frame`` as Kafka records: ``value`` the message of every column but ``key``,
    ``topic``, ``partition`` and ``headers`` (each a field of the message), framed in the
    Confluent wire format when ``schema_id`` is set. A row that does not encode fails
    the batch, naming the field."""
    fields = [c for c in frame.columns if c not in SINK_COLUMNS]
    known = schema.struct.fieldNames()
    unknown = [c for c in fields if c not in known]
    if not fields or unknown:
        raise UserError(
            f"value_format: protobuf encodes the flow's columns but key as fields of "
            f"{schema.message} ({', '.join(known)}): "
            + (f"it has no field {', '.join(unknown)}" if unknown else "the flow has none")
        )
    header = None
    if schema_id is not None:
        indexes = message_indexes(find_message(schema.data, schema.message))
        header = bytes(confluent_header(schema_id)) + indexes_bytes(indexes)
    kept = [f for f in frame.schema.fields if f.name in SINK_COLUMNS]
    result = StructType([*kept, StructField("value", BinaryType(), True)])
    out = pa.schema(
        [pa.field(f.name, to_arrow_type(f.dataType, timezone="UTC")) for f in result.fields]
    )
    return frame.select(*[f.name for f in kept], *fields).mapInArrow(
        _encode_batches(schema.data, schema.message, header, out), result
    )
