"""Avro values in a spec: the schema file is found from the spec's folder and read when
the spec loads (so ``dry-run`` names a missing or broken one in one line), and gives the
records' schema; the value keys are checked against each other."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from binary_values import spec_file
from streamsmith.errors import UserError
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.describe import describe_plan
from streamsmith.runtime.plan import build_plan
from streamsmith.schemas.avro import record_struct
from streamsmith.transforms.events import RecordParser

CLICK = {
    "type": "record",
    "name": "Click",
    "fields": [
        {"name": "user", "type": "string"},
        {"name": "ms", "type": ["null", "int"]},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    ],
}


AVRO = {"value_format": "avro", "value_schema": "schemas/click.avsc"}


def test_the_records_schema_is_the_avro_schemas_with_paths_from_the_spec_folder(
    tmp_path: Path,
) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas/click.avsc").write_text(json.dumps(CLICK))
    sink = {"format": "kafka", "topic": "out", **AVRO, "value_schema_id": 3}
    framed = {**AVRO, "value_wire_format": "confluent", "value_schema_id": 7}
    app, spec = load_pipeline(spec_file(tmp_path, {**framed, "required": ["user"]}, sink))
    shown = describe_plan(build_plan(app, spec))
    assert f"Avro values by {tmp_path}/schemas/click.avsc (confluent, schema id 7)" in shown
    schema = app.flows[0].record_schema
    assert schema is not None and schema.simpleString() == "struct<user:string,ms:int,ts:timestamp>"
    assert spec.sources["clicks"].value_schema == str(tmp_path / "schemas/click.avsc")
    sink_settings = spec.flows["clicks"].sink.settings  # type: ignore[union-attr]
    assert sink_settings["value_schema"] == str(tmp_path / "schemas/click.avsc")


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (
            None,
            r"sources\.clicks\.value_schema .*: cannot read the Avro schema .*avsc: No such file",
        ),
        ("{not json", r"\S*click\.avsc is not JSON, so not an Avro schema"),
        (
            '"string"',
            r"click\.avsc is not an Avro schema .*: the value schema must be an Avro record",
        ),
        (
            json.dumps({"type": "record", "name": "N", "fields": [{"name": "n", "type": "N"}]}),
            r"click\.avsc is not an Avro schema .*: n: refers to record N inside itself",
        ),
        (
            json.dumps(
                {"type": "record", "name": "C", "fields": [{"name": "x", "type": "decimal"}]}
            ),
            r"x: unknown type 'decimal'",
        ),
    ],
)
def test_a_missing_or_broken_schema_file_is_one_line_naming_it(
    tmp_path: Path, content: str | None, error: str
) -> None:
    if content is not None:
        (tmp_path / "schemas").mkdir()
        (tmp_path / "schemas/click.avsc").write_text(content)
    with pytest.raises(UserError) as caught:
        load_pipeline(spec_file(tmp_path, AVRO))
    assert len(str(caught.value).splitlines()) == 1
    assert re.search(error, str(caught.value)), str(caught.value)


@pytest.mark.parametrize(
    ("source", "error"),
    [
        ({"value_format": "avro"}, "value_format: avro needs value_schema"),
        (
            {"value_schema": "c.avsc"},
            "value_schema is for Avro or Protobuf values: set value_format",
        ),
        ({**AVRO, "schema": "user string"}, "the records' schema is value_schema's: remove schema"),
        ({**AVRO, "value_schema_id": 4}, "value_schema_id is the id in the Confluent wire format"),
        (
            {**AVRO, "options": {"subscribe": "clicks", "valueFormat": "json"}},
            "options.valueFormat/valueSchema decode JSON at the source",
        ),
        ({**AVRO, "value_wire_format": "framed"}, "value_wire_format"),
    ],
)
def test_value_keys_that_do_not_fit_together_are_refused(
    tmp_path: Path, source: dict[str, Any], error: str
) -> None:
    with pytest.raises(UserError, match=re.escape(error)):
        load_pipeline(spec_file(tmp_path, source))


def test_a_sink_schema_needs_avro_values(tmp_path: Path) -> None:
    sink = {"format": "kafka", "topic": "out", "value_schema_id": 3}
    with pytest.raises(
        UserError, match="value_schema and value_schema_id are for value_format: avro"
    ):
        build_plan(*load_pipeline(spec_file(tmp_path, {"schema": "user string, ms int"}, sink)))


def test_the_schema_file_of_one_of_several_sinks_is_found_and_checked(tmp_path: Path) -> None:
    sinks = {
        "lake": {"table": "clicks"},
        "topic": {"format": "kafka", "topic": "out", **AVRO},
    }
    path = spec_file(tmp_path, {"schema": "user string, ms int"})
    document = yaml.safe_load(path.read_text())
    document["flows"]["clicks"] = {**document["flows"]["clicks"], "sinks": sinks}
    del document["flows"]["clicks"]["sink"]
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(UserError, match=r"flows\.clicks\.sinks\.topic\.value_schema .*avsc"):
        load_pipeline(path)
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas/click.avsc").write_text(json.dumps(CLICK))
    _, spec = load_pipeline(path)
    kept = spec.flows["clicks"].sinks or {}
    assert kept["topic"].settings["value_schema"] == str(tmp_path / "schemas/click.avsc")
    assert "value_schema" not in kept["lake"].settings


PYTHON_PIPELINE = """
import streamsmith as ss

pipeline = ss.Pipeline(
    "shop",
    sources={"clicks": {"format": "kafka", "options": {"subscribe": "clicks"},
                        "value_format": "avro", "value_schema": "click.avsc"}},
    spec={"kafka": {"bootstrap_servers": "127.0.0.1:9092"}},
)


@pipeline.flow(sink={"table": "clicks"})
def clicks(records):
    return records.select("user", "ms")
"""


def test_a_flow_in_python_over_avro_values_reads_them_through_the_decoding_check(
    tmp_path: Path,
) -> None:
    """A flow declared in code takes no schema, yet its Avro values are parsed by the
    schema file, so a value that does not decode is quarantined, never a row of nulls."""
    (tmp_path / "click.avsc").write_text(json.dumps(CLICK))
    (tmp_path / "shop_pipeline.py").write_text(PYTHON_PIPELINE)
    plan = build_plan(*load_pipeline(tmp_path / "shop_pipeline.py"))
    (flow,) = plan.flows
    assert flow.definition.prepare == RecordParser(record_struct(CLICK))
    assert flow.definition.quarantine
    assert [output.role for output in plan.outputs] == ["main", "quarantine"]
