"""A Protobuf message (from a FileDescriptorSet, as ``protoc --include_imports
--descriptor_set_out`` writes it) as the Spark record schema its values decode to,
worked out without Spark so a spec is checked before a JVM starts.

Scalars keep their width (``int32`` int, ``uint32`` and the 64-bit kinds bigint: Spark has
no unsigned types, so ``uint64`` values above 2^63 - 1 do not fit and fail the decode),
enums are strings (the value's name), ``bytes`` binary, nested messages structs, repeated
fields arrays, map fields maps and ``google.protobuf.Timestamp`` a timestamp. A message
that holds itself (directly or not) cannot be a Spark type and is refused, naming the
field.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

TIMESTAMP = "google.protobuf.Timestamp"

_F = FieldDescriptor
_SCALARS: dict[int, DataType] = {
    _F.TYPE_DOUBLE: DoubleType(),
    _F.TYPE_FLOAT: FloatType(),
    _F.TYPE_INT32: IntegerType(),
    _F.TYPE_SINT32: IntegerType(),
    _F.TYPE_SFIXED32: IntegerType(),
    _F.TYPE_UINT32: LongType(),
    _F.TYPE_FIXED32: LongType(),
    _F.TYPE_INT64: LongType(),
    _F.TYPE_SINT64: LongType(),
    _F.TYPE_SFIXED64: LongType(),
    _F.TYPE_UINT64: LongType(),
    _F.TYPE_FIXED64: LongType(),
    _F.TYPE_BOOL: BooleanType(),
    _F.TYPE_STRING: StringType(),
    _F.TYPE_BYTES: BinaryType(),
    _F.TYPE_ENUM: StringType(),
}


class ProtobufSchemaError(ValueError):
    """A descriptor set or message this converter cannot take; says which and where."""


def descriptor_pool_of(data: bytes) -> descriptor_pool.DescriptorPool:
    """A pool holding every file of the serialized FileDescriptorSet ``data``."""
    try:
        files = descriptor_pb2.FileDescriptorSet.FromString(data)
    except DecodeError as exc:
        raise ProtobufSchemaError(f"not a FileDescriptorSet: {exc}") from None
    if not files.file:
        raise ProtobufSchemaError("a FileDescriptorSet with no files")
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        try:
            pool.AddSerializedFile(file.SerializeToString())
        except (TypeError, ValueError) as exc:  # upb: a missing import, a clash
            raise ProtobufSchemaError(
                f"{file.name} does not build: {exc} (write the set with protoc --include_imports)"
            ) from None
    return pool


def message_names(data: bytes) -> list[str]:
    """The full names of the messages the FileDescriptorSet ``data`` defines."""
    files = descriptor_pb2.FileDescriptorSet.FromString(data)
    names: list[str] = []

    def add(prefix: str, messages: list[descriptor_pb2.DescriptorProto]) -> None:
        for message in messages:
            if not message.options.map_entry:
                names.append(f"{prefix}{message.name}")
                add(f"{prefix}{message.name}.", list(message.nested_type))

    for file in files.file:
        add(f"{file.package}." if file.package else "", list(file.message_type))
    return names


def find_message(data: bytes, name: str) -> Descriptor:
    """The message ``name`` (its full name, ``package.Message``) in the set ``data``."""
    pool = descriptor_pool_of(data)
    try:
        return pool.FindMessageTypeByName(name)
    except KeyError:
        found = ", ".join(message_names(data)) or "none"
        raise ProtobufSchemaError(f"no message {name!r} in it (messages: {found})") from None


def message_struct(message: Descriptor) -> StructType:
    """The struct a value of ``message`` decodes to."""
    return _struct(message, (message.full_name,), "")


def _struct(message: Descriptor, within: tuple[str, ...], at: str) -> StructType:
    return StructType(
        [StructField(f.name, _field_type(f, within, f"{at}{f.name}"), True) for f in message.fields]
    )


def _field_type(field: FieldDescriptor, within: tuple[str, ...], at: str) -> DataType:
    if is_map(field):
        key, value = (
            field.message_type.fields_by_name["key"],
            field.message_type.fields_by_name["value"],
        )
        return MapType(_single(key, within, at), _single(value, within, f"{at}{{}}"), True)
    single = _single(field, within, at)
    return ArrayType(single, False) if field.is_repeated else single


def _single(field: FieldDescriptor, within: tuple[str, ...], at: str) -> DataType:
    if field.type in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
        nested = field.message_type
        if nested.full_name == TIMESTAMP:
            return TimestampType()
        if nested.full_name in within:
            raise ProtobufSchemaError(
                f"{at}: holds message {nested.full_name} inside itself (recursive), which "
                "no Spark type holds"
            )
        return _struct(nested, (*within, nested.full_name), f"{at}.")
    return _SCALARS[field.type]


def is_map(field: FieldDescriptor) -> bool:
    """Whether ``field`` is a map field (a repeated entry message protoc made)."""
    return (
        field.is_repeated
        and field.type == _F.TYPE_MESSAGE
        and bool(field.message_type.GetOptions().map_entry)
    )
