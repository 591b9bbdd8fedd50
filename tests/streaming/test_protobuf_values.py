"""Protobuf values on Kafka, run through the command line as a user runs a pipeline:
Confluent-framed messages decoded by a descriptor set, malformed values quarantined with
their raw bytes and the reason, and a Kafka sink writing Protobuf in the wire format
that decodes back with the protobuf runtime."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from typer.testing import CliRunner

from binary_values import quarantine, reconciled
from protobuf_click import click_class, write_descriptor_set
from streamsmith.cli import cli
from streamsmith.errors import UserError
from streamsmith.io.avro_values import confluent_header
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.lake import read_table, table_path
from streamsmith.io.protobuf_values import (
    decode_protobuf_values,
    encode_protobuf_values,
    load_protobuf_schema,
)
from streamsmith.transforms.quarantine import READ_ERROR

Click = click_class()
HEADER = bytes(confluent_header(7)) + b"\x00"  # schema id 7, message indexes [0]


def click(user: str, second: int, **fields: Any) -> bytes:
    message = Click(user=user, **fields)
    message.ts.FromSeconds(1_795_000_000 + second)
    return message.SerializeToString()


def stamp(second: int) -> datetime:
    """A decoded timestamp as PySpark collects it (local time, naive)."""
    return datetime.fromtimestamp(1_795_000_000 + second)


@pytest.mark.deep
def test_confluent_framed_protobuf_values_decode_and_a_kafka_sink_writes_them_back(
    spark: SparkSession,
    broker: EmbeddedBroker,
    produce: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source_topic, out_topic = "protobuf-framed", "protobuf-out"
    for name in (source_topic, out_topic):
        broker.create_topic(name, partitions=1)
    first = Click(user="u1", ms=50, kind=1, tags=["a", "b"], big=2**40)
    first.ts.FromSeconds(1_795_000_001)
    first.attrs["x"] = 1.5
    first.inner.a = 3
    first.inner.parts.add(a=4)
    good = [first.SerializeToString(), click("u2", 2, ms=150), click("u3", 3)]
    values = [
        *(HEADER + value for value in good),
        bytes(confluent_header(8)) + b"\x00" + good[0],  # another schema id
        good[1],  # no wire-format header
        HEADER + b"\xff\xff",  # not a message
        bytes(confluent_header(7)) + b"\x02\x02" + good[0],  # message indexes [1]: shop.Other
        HEADER + click("u4", 4, big=2**63),  # over Spark's bigint
    ]
    produce(source_topic, values, partitions=1)
    folder = tmp_path / "shop"
    write_descriptor_set(folder / "schemas/click.desc")
    protobuf = {"value_format": "protobuf", "value_schema": "schemas/click.desc",
                "value_message": "shop.Click"}  # fmt: skip
    spec = {
        "name": "shop",
        "storage_root": "data",
        "kafka": {"bootstrap_servers": broker.bootstrap},
        "sources": {"clicks": {"format": "kafka", **protobuf, "value_wire_format": "confluent",
                               "value_schema_id": 7, "options": {
                                   "subscribe": source_topic, "startingOffsets": "earliest"}}},
        "flows": {
            "clicks": {"source": "clicks", "sink": {"table": "clicks"}, "sql":
                       "SELECT user, ms, ts, kind, tags, attrs, inner.a AS a, "
                       "inner.parts[0].a AS part, big FROM clicks"},
            "slow_clicks": {"source": "clicks",
                            "sql": "SELECT user AS key, user, ms, ts, kind, tags, attrs, inner, "
                                   "big FROM clicks WHERE ms > 10",
                            "sink": {"format": "kafka", "topic": out_topic, **protobuf,
                                     "value_schema_id": 7}},
        },
    }  # fmt: skip
    (folder / "streamsmith.yml").write_text(yaml.safe_dump(spec))
    monkeypatch.chdir(folder)
    monkeypatch.delenv("STREAMSMITH_ROOT", raising=False)
    root = folder / "data"

    result = CliRunner().invoke(cli, ["run", "--trigger", "available-now"])
    assert result.exit_code == 0, result.output

    found = read_table(spark, table_path(root, "clicks")).orderBy("user").collect()
    assert [tuple(row) for row in found] == [
        ("u1", 50, stamp(1), "BUY", ["a", "b"], {"x": 1.5}, 3, 4, 2**40),
        ("u2", 150, stamp(2), "VIEW", [], {}, None, None, 0),
        ("u3", None, stamp(3), "VIEW", [], {}, None, None, 0),
    ]
    where = f"kafka://{source_topic}/0"
    assert quarantine(spark, root, "clicks"    ) == [
        (3, "Protobuf value written with schema id 8, not 7 (value_schema_id) of shop.Click "
         "(click.desc)", values[3], where),
        (4, "not in the Confluent wire format (value_wire_format: confluent): no magic byte 0, "
         "4-byte schema id and message indexes before the Protobuf message", values[4], where),
        (5, "malformed Protobuf value of shop.Click (click.desc): Error parsing message with "
         "type 'shop.Click': Wire format was corrupt", values[5], where),
        (6, "Protobuf value written for message indexes [1], not [0]", values[6], where),
        (7, "Protobuf value of shop.Click (click.desc) does not fit the record: "
         "9223372036854775808 is over 2^63 - 1, the largest Spark bigint", values[7], where),
    ]  # fmt: skip
    # Counts reconcile: the 8 records read are the 3 rows written and the 5 quarantined.
    assert reconciled(root, "shop", "shop.clicks") == (8, 3, 5)

    out = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", out_topic)
        .load()
        .orderBy("offset")
        .collect()
    )
    assert [(bytes(r.key), bytes(r.value)[:6]) for r in out] == [(b"u1", HEADER), (b"u2", HEADER)]
    second = Click(user="u2", ms=150)
    second.ts.FromSeconds(1_795_000_002)
    assert [Click.FromString(bytes(r.value)[6:]) for r in out] == [first, second]


def test_encoded_values_decode_back_and_a_row_that_does_not_fit_fails_naming_the_field(
    spark: SparkSession, tmp_path: Path
) -> None:
    schema = load_protobuf_schema(write_descriptor_set(tmp_path / "c.desc"), "shop.Click", "test")
    at = datetime(2026, 11, 25, 10, 0, 1, tzinfo=UTC)
    frame = spark.createDataFrame(
        [("k1", "u1", 5, at, "BUY", ["t"], {"x": 2.0}, (7, [(8,)]))],
        "key string, user string, ms int, ts timestamp, kind string, tags array<string>, "
        "attrs map<string,double>, inner struct<a:bigint,parts:array<struct<a:bigint>>>",
    )
    framed = encode_protobuf_values(frame, schema, 7)
    assert framed.columns == ["key", "value"]
    # Beside values framed with another id, or not framed; decoded in one job with the
    # plain values (mapInArrow's Python workers are what this test pays for).
    bad = [("k2", HEADER[:4] + b"\x08\x00"), ("k3", click("u5", 5))]
    framed = framed.union(spark.createDataFrame(bad, "key string, value binary"))
    plain = encode_protobuf_values(frame, schema, None)
    no_error = F.lit(None).cast("string")
    back = decode_protobuf_values(
        framed.withColumn(READ_ERROR, no_error), schema, confluent=True, schema_id=7
    ).union(
        decode_protobuf_values(
            plain.withColumn(READ_ERROR, no_error), schema, confluent=False, schema_id=None
        )
    )
    decoded = (
        "k1", None, "u1", 5, datetime.fromtimestamp(at.timestamp()), "BUY", ["t"],
        {"x": 2.0}, (7, [(8,)]), 0,
    )  # fmt: skip
    assert [tuple(row) for row in back.drop("value").collect()] == [
        decoded,
        ("k2", "Protobuf value written with schema id 8, not 7 (value_schema_id) of "
         "shop.Click (c.desc)", *[None] * 8),
        ("k3", "not in the Confluent wire format (value_wire_format: confluent): no magic "
         "byte 0, 4-byte schema id and message indexes before the Protobuf message",
         *[None] * 8),
        decoded,
    ]  # fmt: skip
    unknown = frame.withColumn("kind", F.lit("RETURN"))
    with pytest.raises(Exception, match=r"does not encode as Protobuf shop\.Click: field kind"):
        encode_protobuf_values(unknown, schema, None).collect()
    with pytest.raises(UserError, match=r"of shop\.Click \(user, .*\): it has no field page$"):
        encode_protobuf_values(frame.withColumn("page", F.lit("/")), schema, None)
