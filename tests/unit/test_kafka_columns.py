"""The pure parts of a pruned Kafka read: which columns a plan uses of the source
(``runtime.pruning.columns_used``), and the batch the source then yields
(``io.kafka.columns``)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from streamsmith.io.kafka.columns import (
    Columns,
    ColumnsError,
    parse_columns,
    pruned_batch,
)
from streamsmith.io.kafka.source import KafkaOptionError, parse_options, source_schema
from streamsmith.runtime.pruning import columns_used

VALUE_TYPE = {
    "type": "struct",
    "fields": [
        {"name": name, "type": kind, "nullable": True, "metadata": {}}
        for name, kind in (("a", "string"), ("b", "integer"), ("c", "double"))
    ],
}
KAFKA = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
_EXPRESSIONS = "org.apache.spark.sql.catalyst.expressions."
_IDS = {name: index for index, name in enumerate([*KAFKA, "json", "json_error"], start=1)}


def _attribute(name: str, key: int | None = None) -> dict[str, Any]:
    """An ``AttributeReference`` as ``LogicalPlan.toJSON`` writes it."""
    return {
        "class": _EXPRESSIONS + "AttributeReference",
        "num-children": 0,
        "name": name,
        "dataType": VALUE_TYPE if name == "json" else "string",
        "nullable": True,
        "metadata": {},
        "exprId": {"product-class": _EXPRESSIONS + "ExprId", "id": key or _IDS[name]},
        "qualifier": [],
    }


def _field(ordinal: int, alias: int) -> list[dict[str, Any]]:
    """``json.<field> AS ...``: an alias over a struct-field access of ``json``."""
    return [
        {"class": _EXPRESSIONS + "Alias", "num-children": 1, "child": 0, "exprId": {"id": alias}},
        {"class": _EXPRESSIONS + "GetStructField", "num-children": 1, "child": 0,
         "ordinal": ordinal, "name": None},
        _attribute("json"),
    ]  # fmt: skip


def _read() -> dict[str, Any]:
    return {
        "class": "org.apache.spark.sql.catalyst.streaming.StreamingRelationV2",
        "num-children": 0,
        "sourceName": "streamsmith_kafka",
        "output": [[_attribute(name)] for name in _IDS],
    }


def _project(*expressions: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "class": "org.apache.spark.sql.catalyst.plans.logical.Project",
        "num-children": 1,
        "projectList": list(expressions),
        "child": 0,
    }


def test_a_plan_reading_a_field_and_the_offset_uses_only_those_and_the_error() -> None:
    nodes = [_project(_field(1, 100), [_attribute("offset")]), _read()]

    used = columns_used(nodes, {100, _IDS["offset"]}, {_IDS["json"], _IDS["offset"]}, VALUE_TYPE)

    assert used == "offset,json.b,json_error"


def test_the_struct_used_whole_or_passed_through_reads_every_field() -> None:
    nodes = [_project([_attribute("json")], [_attribute("value")]), _read()]
    whole = columns_used(nodes, {_IDS["json"], _IDS["value"]}, set(), VALUE_TYPE)
    assert whole == "value,json.a,json.b,json.c,json_error"
    # A filter at the root passes the read's columns through: the sink sees them all.
    every = columns_used([{"class": "Filter", "num-children": 1}, _read()], set(_IDS.values()),
                         set(), VALUE_TYPE)  # fmt: skip
    assert every is None


def test_nothing_is_pruned_when_the_plan_cannot_say() -> None:
    reads_b = [_project(_field(1, 100)), _read()]
    assert columns_used(reads_b, {100}, {_IDS["json"]}, VALUE_TYPE) == "json.b,json_error"
    # A node references a column the serialized expressions do not show.
    assert columns_used(reads_b, {100}, {_IDS["json"], _IDS["key"]}, VALUE_TYPE) is None
    # Another value type than the one the source decodes, or two reads of Kafka.
    other = {**VALUE_TYPE, "fields": VALUE_TYPE["fields"][:2]}
    assert columns_used(reads_b, {100}, {_IDS["json"]}, other) is None
    twice = [{"class": "Union", "num-children": 2}, _project(_field(1, 100)), _read(), _read()]
    assert columns_used(twice, {100}, {_IDS["json"]}, VALUE_TYPE) is None


def _batch() -> pa.RecordBatch:
    decoded = pa.StructArray.from_arrays(
        [
            pa.array(["x", None, "z"]),
            pa.array([1, None, 3], pa.int32()),
            pa.array([0.5, None, 2.0]),
        ],
        names=["a", "b", "c"],
        mask=pa.array([False, True, False]),
    )
    return pa.RecordBatch.from_arrays(
        [
            pa.array([b"k", None, None]),
            pa.array([b'{"a":"x"}', b"{oops", b'{"a":"z"}']),
            pa.array([7, 8, 9], pa.int64()),
            decoded,
            pa.array([None, "invalid JSON value", None]),
        ],
        names=["key", "value", "offset", "json", "json_error"],
    )


def test_a_pruned_batch_keeps_the_named_columns_and_fields_and_the_decode_errors() -> None:
    columns = parse_columns("json.c,offset,json.a,json_error", ["a", "b", "c"])
    assert columns == Columns(("offset",), ("a", "c"))

    batch = pruned_batch(_batch(), columns)

    assert batch.schema.names == ["offset", "json", "json_error"]
    assert batch.column("json").to_pylist() == [{"a": "x", "c": 0.5}, None, {"a": "z", "c": 2.0}]
    assert batch.column("json_error").to_pylist() == [None, "invalid JSON value", None]
    assert batch.column("offset").to_pylist() == [7, 8, 9]


def test_the_columns_option_names_only_what_the_source_yields() -> None:
    with pytest.raises(ColumnsError, match="no field 'd'"):
        parse_columns("json.d", ["a", "b"])
    with pytest.raises(ColumnsError, match="'headers'"):
        parse_columns("headers", ["a"])
    assert parse_columns("offset", ["a", "b"]).fields == ("a",)  # Spark takes no empty struct
    base = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}
    with pytest.raises(KafkaOptionError, match="json.a"):
        parse_options({**base, "columns": "json.a"}, streaming=True)  # values not decoded
    decoded = {**base, "valueFormat": "json", "valueSchema": "a STRING, b INT, c DOUBLE"}
    options = parse_options({**decoded, "columns": "value,json.b"}, streaming=True)
    assert options.columns == Columns(("value",), ("b",))
    schema = source_schema({**decoded, "columns": "value,json.b"})
    assert not isinstance(schema, str)
    assert schema.simpleString() == "struct<value:binary,json:struct<b:int>,json_error:string>"
