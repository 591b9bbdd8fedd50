"""Avro values on Kafka, run through the command line as a user runs a pipeline: plain
and Confluent-framed records decoded by a schema file, malformed values quarantined
with their raw bytes and the reason, and a Kafka sink writing Avro in the wire format."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro, to_avro
from typer.testing import CliRunner

from binary_values import quarantine, reconciled
from streamsmith.cli import cli
from streamsmith.io.avro_values import (
    confluent_header,
    decode_avro_values,
    encode_avro_values,
    load_value_schema,
)
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.lake import read_table, table_path
from streamsmith.schemas.avro import record_struct
from streamsmith.transforms.quarantine import READ_ERROR

Produce = Callable[..., None]

CLICK = {
    "type": "record",
    "name": "Click",
    "namespace": "shop",
    "fields": [
        {"name": "user", "type": "string"},
        {"name": "ms", "type": ["null", "int"], "default": None},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
CLICK_DDL = "user string, ms int, ts timestamp"
GOOD = [("u1", 50, "10:00:01"), ("u2", 150, "10:00:02"), ("u3", None, "10:00:03")]


def encoded(spark: SparkSession, rows: list[tuple[Any, ...]]) -> list[bytes]:
    """Each row as an Avro record of CLICK, written by Spark's own ``to_avro``."""
    frame = spark.createDataFrame(
        [(user, ms, datetime.fromisoformat(f"2026-11-25T{at}")) for user, ms, at in rows],
        CLICK_DDL,
    )
    record = to_avro(F.struct("user", "ms", "ts"), json.dumps(CLICK)).alias("v")
    return [bytes(row.v) for row in frame.select(record).collect()]


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def rows(spark: SparkSession, root: Path, table: str) -> list[tuple[str, ...]]:
    found = read_table(spark, table_path(root, table)).collect()
    return sorted(tuple(str(value) for value in row) for row in found)


def write_project(folder: Path, spec: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Path:
    """A pipeline's folder: its spec and schemas/click.avsc; the working directory."""
    (folder / "schemas").mkdir(parents=True)
    (folder / "schemas/click.avsc").write_text(json.dumps(CLICK))
    (folder / "streamsmith.yml").write_text(yaml.safe_dump(spec))
    monkeypatch.chdir(folder)
    monkeypatch.delenv("STREAMSMITH_ROOT", raising=False)
    return folder / "data"


AVRO = {"value_format": "avro", "value_schema": "schemas/click.avsc"}
MALFORMED = "malformed Avro value: does not decode with schema click.avsc"


def test_confluent_framed_avro_values_are_decoded_and_the_rest_quarantined_with_raw_bytes(
    spark: SparkSession,
    broker: EmbeddedBroker,
    produce: Produce,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = "avro-framed"
    broker.create_topic(topic, partitions=1)
    good = encoded(spark, GOOD)
    header = bytes(confluent_header(7))
    framed = [
        *(header + value for value in good),
        bytes(confluent_header(8)) + good[0],  # another schema id
        good[1],  # no wire-format header
        header + b"\xff\xff",  # not a record
        header + good[2] + b"\x00\x00",  # bytes after the record
    ]
    produce(topic, framed, partitions=1)
    source = {"format": "kafka", **AVRO, "value_wire_format": "confluent", "value_schema_id": 7,
              "options": {"subscribe": topic, "startingOffsets": "earliest"}}  # fmt: skip
    spec = {
        "name": "shop",
        "storage_root": "data",
        "kafka": {"bootstrap_servers": broker.bootstrap},
        "sources": {"clicks": source},
        "flows": {"clicks": {"source": "clicks", "sql": "SELECT * FROM clicks",
                             "sink": {"table": "clicks"}}},
    }  # fmt: skip
    root = write_project(tmp_path / "shop", spec, monkeypatch)

    invoke("run", "--trigger", "available-now")

    assert rows(spark, root, "clicks") == [
        ("u1", "50", "2026-11-25 10:00:01"),
        ("u2", "150", "2026-11-25 10:00:02"),
        ("u3", "None", "2026-11-25 10:00:03"),
    ]
    where = f"kafka://{topic}/0"
    size = len(good[2])
    assert quarantine(spark, root, "clicks") == [
        (3, "Avro value written with schema id 8, not 7 (value_schema_id) of click.avsc",
         framed[3], where),
        (4, "not in the Confluent wire format (value_wire_format: confluent): no magic byte 0 "
         "and 4-byte schema id before the Avro record", framed[4], where),
        (5, MALFORMED, framed[5], where),
        (6, f"Avro value of {size + 2} bytes holds a record of {size} under schema click.avsc: "
         "written with another schema?", framed[6], where),
    ]  # fmt: skip
    # Counts reconcile: the 7 records read are the 3 rows written and the 4 quarantined.
    assert reconciled(root, "shop", "shop.clicks") == (7, 3, 4)


@pytest.mark.deep
def test_plain_avro_values_on_the_python_connector_and_a_kafka_sink_writing_avro_framed(
    spark: SparkSession,
    broker: EmbeddedBroker,
    produce: Produce,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain_topic, out_topic = "avro-plain", "avro-out"
    for name in (plain_topic, out_topic):
        broker.create_topic(name, partitions=1)
    good = encoded(spark, GOOD[:2])
    produce(plain_topic, [*good, b"\xff\xff"], partitions=1)
    spec = {
        "name": "shop",
        "storage_root": "data",
        "kafka": {"bootstrap_servers": broker.bootstrap},
        # streamsmith's own connector here (Spark's in the framed test): Avro values are
        # decoded after either has read them.
        "sources": {"clicks": {"format": "kafka", **AVRO, "connector": "python", "options": {
            "subscribe": plain_topic, "startingOffsets": "earliest"}}},
        "flows": {
            "clicks": {"source": "clicks", "sql": "SELECT * FROM clicks",
                       "sink": {"table": "clicks"}},
            "slow_clicks": {"source": "clicks",
                            "sql": "SELECT user AS key, user, ms, ts FROM clicks WHERE ms > 100",
                            "sink": {"format": "kafka", "topic": out_topic, **AVRO,
                                     "value_schema_id": 7}},
        },
    }  # fmt: skip
    root = write_project(tmp_path / "shop", spec, monkeypatch)

    invoke("run", "--trigger", "available-now")

    assert rows(spark, root, "clicks") == [
        ("u1", "50", "2026-11-25 10:00:01"),
        ("u2", "150", "2026-11-25 10:00:02"),
    ]
    assert quarantine(spark, root, "clicks") == [
        (2, MALFORMED, b"\xff\xff", f"kafka://{plain_topic}/0")
    ]
    written = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", out_topic)
        .load()
        .collect()
    )
    assert [(bytes(r.key), bytes(r.value)[:5]) for r in written] == [
        (b"u2", bytes(confluent_header(7)))
    ]
    decoded = spark.createDataFrame([(bytes(written[0].value)[5:],)], "value binary").select(
        from_avro("value", json.dumps(CLICK)).alias("click")
    )
    assert [tuple(row.click) for row in decoded.collect()] == [
        ("u2", 150, datetime(2026, 11, 25, 10, 0, 2))
    ]


def test_encoded_values_decode_back_framed_or_plain(spark: SparkSession, tmp_path: Path) -> None:
    """What a Kafka sink writes (every column but the key, as the record) is what a
    source decodes, in the Confluent wire format or plain."""
    (tmp_path / "click.avsc").write_text(json.dumps(CLICK))
    schema = load_value_schema(tmp_path / "click.avsc", "test")
    rows_in = [("k1", "u1", 50, datetime(2026, 11, 25, 10, 0, 1))]
    frame = spark.createDataFrame(rows_in, f"key string, {CLICK_DDL}")
    for schema_id in (7, None):
        values = encode_avro_values(frame, schema, schema_id)
        assert values.columns == ["key", "value"]
        header = bytes(values.first().value)[:5]  # type: ignore[union-attr]
        assert (header == bytes(confluent_header(7))) == (schema_id is not None)
        records = values.withColumn(READ_ERROR, F.lit(None).cast("string"))
        confluent = schema_id is not None
        back = decode_avro_values(records, schema, confluent=confluent, schema_id=schema_id)
        found = [(r.key, r.user, r.ms, r.ts, r[READ_ERROR]) for r in back.collect()]
        assert found == [(*rows_in[0], None)]


def test_the_schema_file_converts_to_what_from_avro_decodes(spark: SparkSession) -> None:
    """streamsmith's reading of an .avsc (a spec is checked before Spark starts) gives the
    type spark-avro decodes to, over every kind of Avro type."""
    schema = {
        "type": "record",
        "name": "All",
        "fields": [
            {"name": "s", "type": "string"}, {"name": "n", "type": ["null", "int"]},
            {"name": "l", "type": "long"}, {"name": "f", "type": "float"},
            {"name": "d", "type": "double"}, {"name": "b", "type": "boolean"},
            {"name": "raw", "type": "bytes"},
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "amount",
             "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
            {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
            {"name": "id", "type": {"type": "fixed", "name": "Id", "size": 4}},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "attrs", "type": {"type": "map", "values": ["null", "double"]}},
            {"name": "either", "type": ["int", "string"]},
            {"name": "wide", "type": ["int", "long"]},
            {"name": "inner", "type": {"type": "record", "name": "Inner",
                                       "fields": [{"name": "a", "type": "int"}]}},
            {"name": "again", "type": ["null", "Inner"]},
        ],
    }  # fmt: skip
    frame = spark.createDataFrame([(b"",)], "value binary")
    decoded = frame.select(from_avro("value", json.dumps(schema), {"mode": "PERMISSIVE"}))
    assert record_struct(schema).simpleString() == decoded.schema[0].dataType.simpleString()
