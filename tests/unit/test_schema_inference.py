"""``schema: infer``: a record schema decided from a sample of the input, stored as
version 0 and read back ever after; mistakes are one line naming the field and the
records. No Spark: inference, the store and ``streamsmith schema show`` run without it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from streamsmith.cli import cli
from streamsmith.errors import UserError
from streamsmith.io.schema_store import (
    file_sample,
    inferred_schema,
    record,
    schema_dir,
    to_ddl,
    value_sample,
    versions,
)
from streamsmith.pipelines import load_pipeline
from streamsmith.schemas.ddl import parse_schema
from streamsmith.schemas.inference import InferenceError, infer_schema


def sample(*records: object) -> list[tuple[str, object]]:
    return [(f"a.jsonl:{n}", record) for n, record in enumerate(records, 1)]


def test_the_narrowest_type_holding_every_sampled_value() -> None:
    schema = infer_schema(sample(
        {"user": "u1", "n": 1, "amount": 2, "ok": True, "ts": "2026-11-25T10:00:00Z",
         "geo": {"lat": 1}, "tags": ["a"], "seen": None},
        {"user": "u2", "n": 3, "amount": 2.5, "ts": "2026-11-25 10:00:01.5+01:00",
         "geo": {"lat": 1.5, "city": "Oslo"}, "when": "tomorrow", "seen": None},
        {"when": "2026-11-25T10:00:00"},
    ))  # fmt: skip
    assert to_ddl(schema) == (
        "user string, n bigint, amount double, ok boolean, ts timestamp, "
        "geo struct<lat:double,city:string>, tags array<string>, seen string, when string"
    )
    hinted = infer_schema(sample({"amount": 2, "n": 1}), parse_schema("amount decimal(12,2)"))
    assert to_ddl(hinted) == "amount decimal(12,2), n bigint"


@pytest.mark.parametrize(
    ("records", "message"),
    [
        (({"a": 1}, {"a": {"b": 1}}),
         "field 'a' holds a bigint in a.jsonl:1 but an object in a.jsonl:2"),
        (({"a": [1]}, {"a": ["x", {"b": 1}]}), r"field 'a\[\]' holds a bigint .* but a string"),
        (({"a": True}, {"a": 1}), r'give its type in schema_hints \(e.g. "a string"\)'),
        (([1, 2],), "a.jsonl:1: a record must be a JSON object, not an array"),
        ((), "no records to infer a schema from"),
    ],
)  # fmt: skip
def test_a_sample_that_cannot_decide_says_which_field_and_where(
    records: tuple[object, ...], message: str
) -> None:
    with pytest.raises(InferenceError, match=message):
        infer_schema(sample(*records))


def test_versions_are_stored_once_and_read_back(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"user": "u1", "n": 1}\nnot json\n')
    with gzip.open(folder / "b.jsonl.gz", "wt") as zipped:
        zipped.write('{"user": "u2", "n": 2.5, "ts": "2026-11-25T10:00:00Z"}\n')
    store = schema_dir(tmp_path, "app", "clicks")
    first = inferred_schema(store, lambda: file_sample(folder, None), None)
    assert (first.version, first.ddl) == (0, "user string, n double, ts timestamp")
    assert first.sample == (str(folder / "a.jsonl"), str(folder / "b.jsonl.gz"))
    (folder / "c.jsonl").write_text('{"user": "u3", "other": true}\n')
    assert inferred_schema(store, lambda: file_sample(folder, None), None) == first  # stored
    second = record(store, parse_schema("user string"), "by hand")
    assert [v.version for v in versions(store)] == [0, 1]
    assert inferred_schema(store, lambda: file_sample(folder, None), None) == second
    with pytest.raises(InferenceError, match="no input to infer the schema from"):
        inferred_schema(tmp_path / "none", lambda: file_sample(tmp_path / "empty", None), None)
    with pytest.raises(InferenceError, match="schema_hints name field.* nope, which no sampled"):
        hint = parse_schema("nope int")
        inferred_schema(tmp_path / "other", lambda: file_sample(folder, None), hint)


def nested(depth: int) -> dict[str, object]:
    """A record ``depth`` objects deep, built without recursion."""
    value: dict[str, object] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_a_record_nested_too_deep_is_left_out_of_the_sample_as_malformed(tmp_path: Path) -> None:
    deep = '{"a": ' * 10_000 + "1" + "}" * 10_000
    (tmp_path / "a.jsonl").write_text(deep + '\n{"k": "x", "n": 1}\n')
    assert file_sample(tmp_path, None).records == [("a.jsonl:2", {"k": "x", "n": 1})]
    values = [("t@0", deep.encode()), ("t@1", b'{"k": "y"}')]
    assert value_sample(values, "topic t").records == [("t@1", {"k": "y"})]
    store = tmp_path / "store"
    schema = inferred_schema(store, lambda: file_sample(tmp_path, None), None).schema
    assert to_ddl(schema) == "k string, n bigint"
    # Parsed already (Python's parser takes 900 levels): inference leaves it out too.
    assert to_ddl(infer_schema(sample(nested(900), {"k": "z"}))) == "k string"


SPEC = {
    "name": "feed",
    "storage_root": "data",
    "sources": {"events": {"format": "jsonl", "path": "input/events", "schema": "infer",
                           "schema_hints": "n int", "schema_evolution": "rescue"}},
    "flows": {"copy": {"sql": "SELECT * FROM events", "sink": {"table": "copy"}}},
}  # fmt: skip


def test_schema_show_prints_each_version_without_spark(tmp_path: Path) -> None:
    (tmp_path / "data/input/events").mkdir(parents=True)
    (tmp_path / "data/input/events/a.jsonl").write_text(json.dumps({"k": "x", "n": 1}) + "\n")
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(SPEC))
    result = CliRunner().invoke(cli, ["schema", "show", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("events: version 0, 20") and "(1 file(s))" in lines[0]
    assert lines[1] == "  k string, n int"
    shown = CliRunner().invoke(cli, ["schema", "show", str(tmp_path), "--format", "json"])
    assert json.loads(shown.output)["schema"] == "k string, n int"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "csv"}, "schema: infer samples JSON: jsonl files, or Kafka values"),
        ({"schema": "k string"}, "schema_hints go with schema: infer"),
        ({"schema": "k string", "schema_hints": None, "format": "csv"},
         "schema_evolution: rescue tells what the schema lacks"),
        ({"schema_hints": "k"}, "sources.events.schema_hints"),
        ({"path": "input/none"}, "sources.events.schema: infer: no input to infer the schema"),
    ],
)  # fmt: skip
def test_schema_mistakes_are_one_line_naming_the_key(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    document = yaml.safe_load(yaml.safe_dump(SPEC))
    document["sources"]["events"].update(change)
    (tmp_path / "data/input/events").mkdir(parents=True)
    (tmp_path / "data/input/events/a.jsonl").write_text('{"k": "x"}\n')
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(document))
    with pytest.raises(UserError, match=message):
        load_pipeline(tmp_path / "streamsmith.yml")


def test_add_new_columns_evolves_an_inferred_schema_only(tmp_path: Path) -> None:
    document = yaml.safe_load(yaml.safe_dump(SPEC))
    document["sources"]["events"].update(
        {"schema": "k string", "schema_hints": None, "schema_evolution": "add_new_columns"}
    )
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(document))
    with pytest.raises(UserError, match="add_new_columns adds fields to an inferred schema"):
        load_pipeline(tmp_path / "streamsmith.yml")


def test_new_fields_are_added_where_they_appeared_keeping_known_types() -> None:
    from streamsmith.schemas.inference import with_new_fields

    schema = parse_schema("id string, geo struct<lat: double>")
    record = {"id": 7, "geo": {"lat": 1.5, "lon": 2, "at": {"city": "Oslo"}}, "t": [1, "x"]}
    grown = with_new_fields(schema, record, ["geo.lon", "geo.at.city", "t"])
    assert to_ddl(grown) == (
        "id string, geo struct<lat:double,lon:bigint,at:struct<city:string>>, t string"
    )
    assert with_new_fields(grown, record, ["geo.lon"]) == grown  # there already


def test_members_new_to_the_structs_of_an_array_are_typed_from_every_item() -> None:
    from streamsmith.schemas.inference import only_grows, with_new_fields

    schema = parse_schema("id string, items array<struct<sku: string, box: struct<w: bigint>>>")
    record = {"id": "a", "items": [{"sku": "x", "qty": 1}, {"sku": "y", "qty": 2.5},
                                   {"sku": "z", "box": {"w": 1, "h": 2}}]}  # fmt: skip
    grown = with_new_fields(schema, record, ["items[].qty", "items[].box.h"])
    assert to_ddl(grown) == (
        "id string, items array<struct<sku:string,box:struct<w:bigint,h:bigint>,qty:double>>"
    )
    assert only_grows(schema, grown) and not only_grows(grown, schema)
    assert not only_grows(schema, parse_schema("id string, items array<string>"))
    retyped = parse_schema("id string, items array<struct<sku: bigint, box: struct<w: bigint>>>")
    assert not only_grows(schema, retyped)
