"""Avro values on Kafka: decoded with spark-avro's ``from_avro`` at a source, encoded with
``to_avro`` at a sink, plain or in the Confluent wire format.

A value that does not decode is never dropped and never fails the query: it keeps null
fields and a reason in ``_read_error``, so it goes to the flow's quarantine with its raw
bytes (base64, since the quarantine's ``raw`` is text). ``from_avro`` in PERMISSIVE mode
gives a struct of nulls for a bad value, which a record whose fields are all null would
look like too, so the value is read with one more field, defaulted to true by Avro's
schema resolution: null there means the value did not decode. Avro binary carries no
length, so a value longer than its record (bytes after it: most often a value written
with another schema) also decodes; it is told by encoding the record again and comparing
lengths (writers that split arrays or maps into several blocks, which Kafka serializers
do not, would be told too).

The Confluent wire format puts a magic byte 0 and the writer schema's 4-byte id
(big-endian) before the Avro record. Plain Avro may start with a 0 byte as well (the
first branch of a union, a zero, an empty string), so the framing is declared in the
spec (``value_wire_format: confluent``), never guessed; ``value_schema_id`` checks the id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro, to_avro
from pyspark.sql.types import StructType

from streamsmith.errors import UserError
from streamsmith.schemas.avro import AvroSchemaError, record_struct
from streamsmith.transforms.quarantine import READ_ERROR

_DECODED = "_streamsmith_avro"
_READ = "_streamsmith_decoded"  # the field Avro's defaults set to true on a decoded value
_HEADER = 5  # the Confluent wire format: magic byte 0, then the schema id in 4 bytes
# Columns a Kafka sink takes beside the value: not fields of the record it encodes.
SINK_COLUMNS = ("key", "topic", "partition", "headers")


@dataclass(frozen=True)
class AvroValueSchema:
    """An ``.avsc`` file: its text (what ``from_avro`` and ``to_avro`` take) and the
    record schema it decodes to."""

    path: Path
    text: str
    struct: StructType


def load_value_schema(path: Path, where: str) -> AvroValueSchema:
    """The Avro schema in ``path``; a one-line error naming the file (and ``where`` the
    spec names it) if it cannot be read or is not an Avro record schema."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UserError(f"{where}: cannot read the Avro schema {path}: {reason}") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: {path} is not JSON, so not an Avro schema: {exc}") from None
    try:
        struct = record_struct(document)
    except (AvroSchemaError, KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{where}: {path} is not an Avro schema streamsmith reads: {exc}") from None
    return AvroValueSchema(path, text, struct)


def decode_avro_values(
    frame: DataFrame, schema: AvroValueSchema, *, confluent: bool, schema_id: int | None
) -> DataFrame:
    """``frame`` (Kafka records with ``value`` and ``_read_error``) with the decoded
    fields as top-level columns (over any column of the same name), and the reason a
    value did not decode in ``_read_error``."""
    value = F.col("value")
    size = F.length(value)
    payload, framing = value, None
    if confluent:
        written_id = F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("long")
        framing = F.when(
            (size < _HEADER) | (F.hex(F.substring(value, 1, 1)) != F.lit("00")),
            F.lit(
                "not in the Confluent wire format (value_wire_format: confluent): no magic "
                "byte 0 and 4-byte schema id before the Avro record"
            ),
        )
        if schema_id is not None:
            framing = F.coalesce(
                framing,
                F.when(
                    written_id != F.lit(schema_id),
                    F.concat(
                        F.lit("Avro value written with schema id "),
                        written_id.cast("string"),
                        F.lit(f", not {schema_id} (value_schema_id) of {schema.path.name}"),
                    ),
                ),
            )
        payload = F.when(framing.isNull(), value.substr(F.lit(_HEADER + 1), size - _HEADER))
    record = from_avro(
        payload, schema.text, {"mode": "PERMISSIVE", "avroSchema": _with_read_flag(schema.text)}
    )
    decoded = frame.withColumn(_DECODED, record)
    fields = schema.struct.fieldNames()
    got = F.col(_DECODED)
    ok = got[_READ].isNotNull()
    encoded = to_avro(F.struct(*(got[name].alias(name) for name in fields)), schema.text)
    again = F.when(ok, F.length(encoded))  # only a decoded record encodes again
    read_size = size - _HEADER if confluent else size
    reason = F.coalesce(
        framing if framing is not None else F.lit(None).cast("string"),
        F.when(
            payload.isNotNull() & ~ok,
            F.lit(f"malformed Avro value: does not decode with schema {schema.path.name}"),
        ),
        F.when(
            payload.isNotNull() & (again != read_size),
            F.concat(
                F.lit("Avro value of "),
                read_size.cast("string"),
                F.lit(" bytes holds a record of "),
                again.cast("string"),
                F.lit(f" under schema {schema.path.name}: written with another schema?"),
            ),
        ),
    )
    kept = [F.col(c) for c in frame.columns if c not in fields and c != READ_ERROR]
    taken = [got[f.name].cast(f.dataType).alias(f.name) for f in schema.struct.fields]
    error = F.coalesce(F.col(READ_ERROR), reason).alias(READ_ERROR)
    return decoded.select(*kept, error, *taken)


def _with_read_flag(text: str) -> str:
    """The reader schema: the writer's with a boolean field that defaults to true."""
    document = json.loads(text)
    flag = {"name": _READ, "type": "boolean", "default": True}
    return json.dumps({**document, "fields": [*document["fields"], flag]})


def encode_avro_values(
    frame: DataFrame, schema: AvroValueSchema | None, schema_id: int | None
) -> DataFrame:
    """``frame`` as Kafka records: ``value`` the Avro encoding of every column but
    ``key``, ``topic``, ``partition`` and ``headers`` (with ``schema``, else the one
    ``to_avro`` derives), framed in the Confluent wire format when ``schema_id`` is set."""
    fields = [c for c in frame.columns if c not in SINK_COLUMNS]
    if not fields:
        raise UserError("value_format: avro encodes the flow's columns but key: it has none")
    record = F.struct(*fields)
    encoded = to_avro(record) if schema is None else to_avro(record, schema.text)
    value = encoded if schema_id is None else F.concat(F.lit(confluent_header(schema_id)), encoded)
    kept = [c for c in SINK_COLUMNS if c in frame.columns]
    return frame.select(*kept, value.alias("value"))


def confluent_header(schema_id: int) -> bytearray:
    """The 5 bytes the Confluent wire format puts before an Avro record."""
    return bytearray(b"\x00" + schema_id.to_bytes(4, "big"))


def raw_bytes(value: Column) -> Column:
    """A binary value as the quarantine keeps it (its ``raw`` is text): base64."""
    return F.base64(value)
