"""A Protobuf schema for the tests, built as ``protoc --include_imports
--descriptor_set_out`` would write it (no protoc needed): ``shop.Click`` in
``shop/click.proto``, importing ``google/protobuf/timestamp.proto``."""

from __future__ import annotations

from pathlib import Path

from google.protobuf import descriptor_pb2, timestamp_pb2
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from streamsmith.schemas.protobuf import descriptor_pool_of

_T = descriptor_pb2.FieldDescriptorProto
CLICK_STRUCT = (
    "struct<user:string,ms:int,ts:timestamp,kind:string,tags:array<string>,"
    "attrs:map<string,double>,inner:struct<a:bigint,parts:array<struct<a:bigint>>>,big:bigint>"
)


def _field(
    message: descriptor_pb2.DescriptorProto,
    name: str,
    number: int,
    kind: int,
    *,
    repeated: bool = False,
    type_name: str = "",
    optional: bool = False,
) -> None:
    field = message.field.add(name=name, number=number, type=kind)
    field.label = _T.LABEL_REPEATED if repeated else _T.LABEL_OPTIONAL
    if type_name:
        field.type_name = type_name
    if optional:  # proto3 optional: a synthetic oneof of its own
        field.proto3_optional = True
        field.oneof_index = len(message.oneof_decl)
        message.oneof_decl.add(name=f"_{name}")


def click_descriptor_set() -> bytes:
    """A FileDescriptorSet: ``shop.Click`` (first in its file) and ``shop.Other``."""
    files = descriptor_pb2.FileDescriptorSet()
    timestamp_pb2.DESCRIPTOR.CopyToProto(files.file.add())
    proto = files.file.add(
        name="shop/click.proto",
        package="shop",
        syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"],
    )
    proto.enum_type.add(name="Kind").value.extend(
        [
            descriptor_pb2.EnumValueDescriptorProto(name="VIEW", number=0),
            descriptor_pb2.EnumValueDescriptorProto(name="BUY", number=1),
        ]
    )
    click = proto.message_type.add(name="Click")
    entry = click.nested_type.add(name="AttrsEntry")
    entry.options.map_entry = True
    _field(entry, "key", 1, _T.TYPE_STRING)
    _field(entry, "value", 2, _T.TYPE_DOUBLE)
    inner = click.nested_type.add(name="Inner")
    _field(inner, "a", 1, _T.TYPE_INT64)
    _field(inner, "parts", 2, _T.TYPE_MESSAGE, repeated=True, type_name=".shop.Click.Part")
    _field(click.nested_type.add(name="Part"), "a", 1, _T.TYPE_INT64)
    _field(click, "user", 1, _T.TYPE_STRING)
    _field(click, "ms", 2, _T.TYPE_INT32, optional=True)
    _field(click, "ts", 3, _T.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp")
    _field(click, "kind", 4, _T.TYPE_ENUM, type_name=".shop.Kind")
    _field(click, "tags", 5, _T.TYPE_STRING, repeated=True)
    _field(click, "attrs", 6, _T.TYPE_MESSAGE, repeated=True, type_name=".shop.Click.AttrsEntry")
    _field(click, "inner", 7, _T.TYPE_MESSAGE, type_name=".shop.Click.Inner")
    _field(click, "big", 8, _T.TYPE_UINT64)
    other = proto.message_type.add(name="Other")
    _field(other, "again", 1, _T.TYPE_MESSAGE, type_name=".shop.Other")
    return files.SerializeToString()


def write_descriptor_set(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(click_descriptor_set())
    return path


def click_class(name: str = "shop.Click") -> type[Message]:
    descriptor: Descriptor = descriptor_pool_of(click_descriptor_set()).FindMessageTypeByName(name)
    return GetMessageClass(descriptor)
