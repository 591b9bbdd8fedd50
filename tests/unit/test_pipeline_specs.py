"""Pipelines of your own, checked before Spark starts: the spec names code and schema."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from pyspark.sql.types import (
    ArrayType,
    DecimalType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from streamsmith.config import find_spec
from streamsmith.errors import UserError
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.app import EventTime
from streamsmith.runtime.plan import build_plan, describe_plan
from streamsmith.schemas.ddl import DDLError, parse_schema

CODE = """
def per_user(clicks):
    return clicks.groupBy("window", "user").count()

def two_inputs(clicks, other):
    return clicks
"""


def spec(**flow: object) -> dict[str, object]:
    return {
        "name": "clicks",
        "storage_root": "data",
        "sources": {"clicks": {"format": "jsonl", "path": "input/clicks",
                               "schema": "user string, ts timestamp, ms int"}},
        "flows": {"per_minute": {"source": "clicks", "sink": {"table": "per_minute"}, **flow}},
    }  # fmt: skip


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "user_flows.py").write_text(CODE)
    try:
        yield tmp_path
    finally:
        sys.modules.pop("user_flows", None)
        if str(tmp_path) in sys.path:
            sys.path.remove(str(tmp_path))


def write(project: Path, document: dict[str, object]) -> Path:
    path = project / "streamsmith.yml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_a_spec_names_its_code_schema_and_event_time(project: Path) -> None:
    path = write(project, spec(transform="user_flows:per_user",
                               event_time={"column": "ts", "lateness": "5 minutes",
                                           "window": "1 minute"},
                               expect={"fast": {"sql": "ms < 1000", "action": "drop"},
                                       "known": "user IS NOT NULL"}))  # fmt: skip
    app, pipeline = load_pipeline(path)
    assert pipeline.root == project / "data"  # relative to the spec's folder
    assert find_spec(str(project)) == path and find_spec("cloudtrail") is None
    flow = app.flow("per_minute")
    assert flow.record_schema is not None and flow.record_schema.fieldNames() == [
        "user",
        "ts",
        "ms",
    ]
    plan = build_plan(app, pipeline)
    rule = plan.flows[0].definition.event_time  # the spec's rule, resolved by the plan
    assert rule == EventTime("ts", "5 minutes", "1 minute") and plan.flows[0].definition.stateful
    text = describe_plan(plan)
    assert "event time: ts watermark 5 minutes, windows 1 minute" in text
    assert "expect fast: ms < 1000 (on failure: drop)" in text
    assert "expect known: user IS NOT NULL (on failure: warn)" in text
    assert "late query clicks.per_minute.late" in text


@pytest.mark.parametrize(
    ("flow", "message"),
    [
        ({"transform": "nowhere:f"}, "flows.per_minute.transform: no module 'nowhere'"),
        ({"transform": "user_flows:gone"}, "module 'user_flows' has no 'gone'"),
        ({"transform": "user_flows:two_inputs"}, "cannot be called that way: missing a required"),
        ({}, "name the flow's code: transform: module:function, or sql: SELECT ... FROM clicks"),
        ({"sql": "missing.sql"}, "flows.per_minute.sql: no SQL file"),
        ({"sql": "SELECT 1", "event_time": {"column": "when", "lateness": "1 minute"}},
         "event_time.column: 'when' is not a field of source 'clicks'"),
    ],
)  # fmt: skip
def test_mistakes_in_the_code_a_spec_names_are_caught_before_spark(
    project: Path, flow: dict[str, object], message: str
) -> None:
    path = write(project, spec(**flow))
    with pytest.raises(UserError, match=message) as error:
        load_pipeline(path)
    assert str(error.value).startswith(str(path))  # the spec file, then the flow


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"event_time": {"column": "ts", "lateness": "soon"}}, "invalid duration 'soon'"),
        ({"expect": {"bad name": "ms > 0"}}, "expectation name 'bad name' must be an identifier"),
        ({"expect": {"fast": {"sql": "ms > 0", "action": "shout"}}}, "'warn', 'drop'"),
        ({"transform": "a:b", "sql": "SELECT 1"}, "either a transform or sql, not both"),
    ],
)  # fmt: skip
def test_spec_values_are_validated_with_their_origin(
    project: Path, change: dict[str, object], message: str
) -> None:
    path = write(project, spec(**change))
    with pytest.raises(UserError, match=message) as error:
        load_pipeline(path)
    assert str(path) in str(error.value)


def test_bad_schemas_name_the_source(project: Path) -> None:
    document = spec(sql="SELECT * FROM clicks")
    document["sources"]["clicks"]["schema"] = "user strin"  # type: ignore[index]
    with pytest.raises(UserError, match="sources.clicks.schema: unknown type 'strin'"):
        load_pipeline(write(project, document))


def test_ddl_schemas_parse_without_spark() -> None:
    assert parse_schema("user string, `the ts` timestamp, amount decimal(12,2), "
                        "tags array<string>, s struct<a: int> not null") == StructType([
        StructField("user", StringType()),
        StructField("the ts", TimestampType()),
        StructField("amount", DecimalType(12, 2)),
        StructField("tags", ArrayType(StringType())),
        StructField("s", StructType([StructField("a", IntegerType())]), nullable=False),
    ])  # fmt: skip
    mistakes = {"a int b int": "expected ','", "": "has no fields",
                "a int, a string": "appears twice", "a integr": "unknown type"}  # fmt: skip
    for bad, message in mistakes.items():
        with pytest.raises(DDLError, match=message):
            parse_schema(bad)


def test_a_reference_app_takes_its_event_time_from_the_spec_but_not_its_code(
    tmp_path: Path,
) -> None:
    from streamsmith.apps import get_app
    from streamsmith.config import load_spec

    app = get_app("actions")
    default = build_plan(app, load_spec(app.default_spec, storage_root=str(tmp_path)))
    assert default.flows[0].definition.event_time == EventTime("time", "1 day", "1 hour")
    sets = ["flows.action_counts.event_time.lateness=2h",
            "flows.action_counts_sliding.event_time.slide=10 minutes"]  # fmt: skip
    plan = build_plan(app, load_spec(app.default_spec, sets=sets, storage_root=str(tmp_path)))
    rules = {flow.name: flow.definition.event_time for flow in plan.flows}
    assert rules == {
        "action_counts": EventTime("time", "2 hours", "1 hour"),
        "action_counts_sliding": EventTime("time", "1 day", "1 hour", "10 minutes"),
    }
    assert "event time: time watermark 2 hours, windows 1 hour" in describe_plan(plan)
    for bad, message in (
        ("flows.action_counts.event_time.lateness=soon", "invalid duration 'soon'"),
        ("flows.action_counts.event_time.gap=1m", "gap is read by a flow that keeps sessions"),
        ("flows.action_counts.transform=mine:f", "remove flows.action_counts.transform"),
    ):
        with pytest.raises(UserError, match=message):
            build_plan(app, load_spec(app.default_spec, sets=[bad], storage_root=str(tmp_path)))


def test_init_writes_a_project_for_files_or_kafka(tmp_path: Path) -> None:
    from streamsmith.scaffold import init_project

    files = {p.relative_to(tmp_path / "f").as_posix() for p in init_project(tmp_path / "f")}
    kafka = init_project(tmp_path / "k", "kafka")
    assert "data/input/clicks/sample.jsonl" in files and "pipeline.py" in files
    assert {p.relative_to(tmp_path / "k").as_posix() for p in kafka} == (
        files - {"data/input/clicks/sample.jsonl"} | {"sample/clicks.jsonl"}
    )
    for project in ("f", "k"):  # each spec plans without Spark
        app, pipeline = load_pipeline(tmp_path / project / "streamsmith.yml")
        sys.modules.pop("pipeline", None)  # each project's own module
        text = describe_plan(build_plan(app, pipeline))
        assert "flow clicks_per_minute: pipeline:clicks_per_window" in text
    spec = yaml.safe_load((tmp_path / "k/streamsmith.yml").read_text())
    assert spec["sources"]["clicks"]["format"] == "kafka"
    assert "local_broker" in (tmp_path / "k/tests/conftest.py").read_text()
    with pytest.raises(UserError, match="is not an empty folder"):
        init_project(tmp_path / "k")
    with pytest.raises(UserError, match="choose one of files, kafka"):
        init_project(tmp_path / "n", "s3")


def test_the_reference_apps_catalog_says_what_each_app_module_declares() -> None:
    """`streamsmith apps` lists the catalog without importing the apps: it must agree."""
    from streamsmith.apps import REFERENCE_APPS, reference_app

    for name, description in REFERENCE_APPS.items():
        app = reference_app(name)
        assert (app.name, app.description) == (name, description)
