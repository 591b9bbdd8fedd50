"""Binary values on Kafka (``value_format: avro`` or ``protobuf``): the schema file a
spec names, loaded and checked the same way for both, and the decoding and encoding each
format does (``streamsmith.io.avro_values``, ``streamsmith.io.protobuf_values``)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame

from streamsmith.config import SourceSpec
from streamsmith.io.avro_values import (
    AvroValueSchema,
    decode_avro_values,
    encode_avro_values,
    load_value_schema,
)
from streamsmith.io.protobuf_values import (
    ProtobufValueSchema,
    decode_protobuf_values,
    encode_protobuf_values,
    load_protobuf_schema,
)

ValueSchema = AvroValueSchema | ProtobufValueSchema


def load_values(value_format: str, path: Path, message: str | None, where: str) -> ValueSchema:
    """The schema of ``value_format`` values in ``path`` (for Protobuf, of ``message``);
    a one-line error naming the file and ``where`` the spec names it."""
    if value_format == "protobuf":
        return load_protobuf_schema(path, message, where)
    return load_value_schema(path, where)


def source_values(spec: SourceSpec, where: str) -> ValueSchema:
    """The value schema of a Kafka source with ``value_format: avro`` or ``protobuf``."""
    assert spec.value_schema is not None  # the spec model holds the two together
    return load_values(spec.value_format, Path(spec.value_schema), spec.value_message, where)


def decode_values(records: DataFrame, spec: SourceSpec) -> DataFrame:
    """Kafka records whose values are decoded into top-level columns, a value that does
    not decode keeping null fields and its reason in the read-error column."""
    schema = source_values(spec, "value_schema")
    confluent = spec.value_wire_format == "confluent"
    if isinstance(schema, ProtobufValueSchema):
        return decode_protobuf_values(
            records, schema, confluent=confluent, schema_id=spec.value_schema_id
        )
    return decode_avro_values(records, schema, confluent=confluent, schema_id=spec.value_schema_id)


def encode_values(frame: DataFrame, schema: ValueSchema | None, schema_id: int | None) -> DataFrame:
    """``frame`` as Kafka records whose values encode every column but the key (Avro
    with ``schema`` None: the schema Spark derives from the columns)."""
    if isinstance(schema, ProtobufValueSchema):
        return encode_protobuf_values(frame, schema, schema_id)
    return encode_avro_values(frame, schema, schema_id)
