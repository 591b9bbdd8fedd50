"""Protobuf values in a spec: the descriptor set is found from the spec's folder and read
when the spec loads, its message gives the records' schema (worked out without Spark),
the Confluent framing is read and written as Confluent's serializers do, and ``dry-run``
refuses what cannot run, in one line naming why."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from binary_values import spec_file
from protobuf_click import CLICK_STRUCT, click_descriptor_set, write_descriptor_set
from streamsmith.cli import cli
from streamsmith.errors import UserError
from streamsmith.io.protobuf_values import indexes_bytes, message_indexes, unframe
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import build_plan
from streamsmith.schemas.protobuf import ProtobufSchemaError, find_message, message_struct
from streamsmith.transforms.events import RecordParser

PROTOBUF = {
    "value_format": "protobuf",
    "value_schema": "schemas/click.desc",
    "value_message": "shop.Click",
}


def dry_run(folder: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli, ["dry-run", str(folder / "streamsmith.yml"), "--plan-only", *args]
    )
    # A UserError reaches the user as one line (streamsmith.cli.main); here, the exception.
    return result.exit_code, result.output + str(result.exception or "")


def test_the_message_converts_to_the_record_schema_and_recursion_is_refused() -> None:
    data = click_descriptor_set()
    assert message_struct(find_message(data, "shop.Click")).simpleString() == CLICK_STRUCT
    with pytest.raises(ProtobufSchemaError, match=r"^again: holds message shop\.Other inside"):
        message_struct(find_message(data, "shop.Other"))


def test_the_confluent_framing_reads_what_it_writes() -> None:
    data = click_descriptor_set()
    assert message_indexes(find_message(data, "shop.Click")) == [0]
    assert message_indexes(find_message(data, "shop.Other")) == [1]
    assert message_indexes(find_message(data, "shop.Click.Inner")) == [0, 1]
    assert indexes_bytes([0]) == b"\x00"  # the first message: one byte
    assert indexes_bytes([0, 1]) == b"\x04\x00\x02"  # zigzag varints: count, then each
    header = b"\x00\x00\x00\x00\x07"
    assert unframe(header + b"\x00payload", 7, [0], "C") == (b"payload", None)
    assert unframe(header + b"\x04\x00\x02payload", None, [0, 1], "C") == (b"payload", None)
    assert unframe(header + b"\x02\x02", 7, [0], "C")[1] == (
        "Protobuf value written for message indexes [1], not [0]"
    )
    assert unframe(header + b"\x06\x00", 7, [0], "C")[1] == (
        "not in the Confluent wire format (value_wire_format: confluent): the message "
        "indexes are cut short"
    )
    assert unframe(b"\x00\x00\x00\x00\x08\x00", 7, [0], "C")[1] == (
        "Protobuf value written with schema id 8, not 7 (value_schema_id) of C"
    )
    assert unframe(b"\x01\x00\x00\x00\x07\x00", 7, [0], "C")[1] is not None


def test_the_records_schema_is_the_messages_and_dry_run_shows_the_values(tmp_path: Path) -> None:
    write_descriptor_set(tmp_path / "schemas/click.desc")
    framed = {**PROTOBUF, "value_wire_format": "confluent", "value_schema_id": 7}
    app, spec = load_pipeline(spec_file(tmp_path, framed))
    schema = app.flows[0].record_schema
    assert schema is not None and schema.simpleString() == CLICK_STRUCT
    assert spec.sources["clicks"].value_schema == str(tmp_path / "schemas/click.desc")
    code, output = dry_run(tmp_path)
    assert code == 0, output
    shown = " ".join(output.split())
    assert f"Protobuf values by shop.Click of {tmp_path}/schemas/click.desc" in shown
    assert "(confluent, schema id 7)" in shown


@pytest.mark.parametrize(
    ("source", "setup", "error"),
    [
        ({**PROTOBUF, "value_message": None}, True, "value_format: protobuf needs value_message"),
        (PROTOBUF, False, r"sources\.clicks\.value_schema .*: cannot read the Protobuf "
         r"descriptor set .*click\.desc: No such file"),
        ({**PROTOBUF, "value_message": "shop.Nope"}, True, r"click\.desc \(value_message "
         r"shop\.Nope\): no message 'shop\.Nope' in it \(messages: google\.protobuf\.Timestamp, "
         r"shop\.Click, shop\.Click\.Inner, shop\.Click\.Part, shop\.Other\)"),
        ({**PROTOBUF, "value_message": "shop.Other"}, True, r"click\.desc \(value_message "
         r"shop\.Other\): again: holds message shop\.Other inside itself"),
        ({**PROTOBUF, "value_schema_id": 4}, True, "value_schema_id is the id in the Confluent"),
        ({"value_message": "shop.Click"}, True, "value_message is for Avro or Protobuf values"),
    ],
)  # fmt: skip
def test_a_missing_or_broken_schema_or_message_is_one_line_naming_it(
    tmp_path: Path, source: dict[str, Any], setup: bool, error: str
) -> None:
    if setup:
        write_descriptor_set(tmp_path / "schemas/click.desc")
    with pytest.raises(UserError) as caught:
        load_pipeline(spec_file(tmp_path, {k: v for k, v in source.items() if v is not None}))
    assert len(str(caught.value).splitlines()) == 1
    assert re.search(error, str(caught.value)), str(caught.value)


def test_a_sink_message_is_checked_when_the_spec_loads(tmp_path: Path) -> None:
    write_descriptor_set(tmp_path / "schemas/click.desc")
    sink = {"format": "kafka", "topic": "out", **PROTOBUF, "value_message": "shop.Nope"}
    with pytest.raises(UserError, match=r"flows\.clicks\.sink\.value_schema .*shop\.Nope"):
        load_pipeline(spec_file(tmp_path, PROTOBUF, sink=sink))


@pytest.mark.parametrize("on", ["source", "sink"])
def test_a_real_time_flow_with_protobuf_values_is_refused_at_dry_run(
    tmp_path: Path, on: str
) -> None:
    write_descriptor_set(tmp_path / "schemas/click.desc")
    sink: dict[str, Any] = {"format": "kafka", "topic": "out"}
    if on == "sink":
        source = {"schema": "user string, ms int"}
        sink = {**sink, **PROTOBUF}
    else:
        source = PROTOBUF
    spec_file(tmp_path, source, sink=sink, sql="SELECT user AS key, user, ms FROM clicks")
    code, output = dry_run(tmp_path, "--trigger", "real-time")
    shown = " ".join(output.split())
    assert code != 0
    why = (
        "source 'clicks' has Protobuf values, which streamsmith decodes in Python (mapInArrow)"
        if on == "source"
        else "its kafka sink encodes Protobuf values in Python (mapInArrow)"
    )
    assert f"has trigger real-time=60s, but {why}" in shown, output
    assert "Real-time Mode does not run: use interval=<duration>" in shown


PYTHON_PIPELINE = """
import streamsmith as ss

pipeline = ss.Pipeline(
    "shop",
    sources={"clicks": {"format": "kafka", "options": {"subscribe": "clicks"},
                        "value_format": "protobuf", "value_schema": "click.desc",
                        "value_message": "shop.Click"}},
    spec={"kafka": {"bootstrap_servers": "127.0.0.1:9092"}},
)


@pipeline.flow(sink={"table": "clicks"})
def clicks(records):
    return records.select("user", "ms")
"""


def test_a_flow_in_python_over_protobuf_values_reads_them_through_the_decoding_check(
    tmp_path: Path,
) -> None:
    """A flow declared in code reads the decoded fields by name, and a value that does
    not decode goes to quarantine, as for Avro."""
    write_descriptor_set(tmp_path / "click.desc")
    (tmp_path / "shop_protobuf_pipeline.py").write_text(PYTHON_PIPELINE)
    plan = build_plan(*load_pipeline(tmp_path / "shop_protobuf_pipeline.py"))
    (flow,) = plan.flows
    assert flow.definition.prepare == RecordParser(
        message_struct(find_message(click_descriptor_set(), "shop.Click"))
    )
    assert [output.role for output in plan.outputs] == ["main", "quarantine"]
