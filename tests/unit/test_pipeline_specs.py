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

from streamsmith.defaults import find_spec
from streamsmith.errors import UserError
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.app import EventTime
from streamsmith.runtime.describe import describe_plan
from streamsmith.runtime.plan import build_plan
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


LIBRARY_FLOW = '''
import streamsmith as ss

@ss.flow(event_time=ss.EventTime("ts", "5 minutes", window="1 minute"))
def per_minute_lib(clicks):
    """Clicks per minute."""
    return clicks.groupBy("window").count()
'''


def test_libraries_globs_bring_python_and_sql_flows_as_sdp_writes_them(
    project: Path,
) -> None:
    """``libraries`` as Spark Declarative Pipelines writes it: each .py file's
    ``@streamsmith.flow`` joins the pipeline, each .sql file is a flow; the spec file
    still sets what it names (here a lateness) and gives the defaults a library lacks."""
    (project / "flows/more").mkdir(parents=True)
    (project / "flows/more/slow.sql").write_text(
        "-- SDP's spelling\nCREATE OR REFRESH STREAMING TABLE slow_clicks AS\n"
        "SELECT user, ms FROM STREAM(clicks) WHERE ms > 500;\n"
    )
    (project / "flows/more/notes.txt").write_text("not a library file")
    document = spec(sql="SELECT user FROM clicks")
    document["libraries"] = [{"glob": {"include": "flows/**"}}]
    document["flows"]["per_minute_lib"] = {"event_time": {"lateness": "10 minutes"}}  # type: ignore[index]
    (project / "flows/lib_per_minute.py").write_text(LIBRARY_FLOW)
    try:
        app, pipeline = load_pipeline(write(project, document))
    finally:
        sys.modules.pop("lib_per_minute", None)
    assert sorted(flow.name for flow in app.flows) == [
        "per_minute",
        "per_minute_lib",
        "slow_clicks",
    ]
    assert pipeline.flows["slow_clicks"].source == "clicks"  # from STREAM(clicks)
    assert pipeline.flows["per_minute_lib"].sink.settings["table"] == "per_minute_lib"
    plan = build_plan(app, pipeline)
    rules = {flow.name: flow.definition.event_time for flow in plan.flows}
    assert rules["per_minute_lib"] == EventTime("ts", "10 minutes", "1 minute")
    text = describe_plan(plan)
    assert "flow slow_clicks: sql: flows/more/slow.sql" in text
    assert "flow per_minute_lib: Clicks per minute." in text
    # Each parser's rejects are quarantined once: the two flows that read records alike
    # (no event time required) share one quarantine table.
    quarantines = sorted(o.query_name for f in plan.flows for o in f.outputs
                         if o.role == "quarantine")  # fmt: skip
    assert quarantines == ["clicks.per_minute_lib.quarantine", "clicks.slow_clicks.quarantine"]


@pytest.mark.parametrize(
    ("libraries", "message"),
    [
        ([{"glob": {"include": "nothing/**"}}], r"libraries\[0\]: no .py or .sql file matches"),
        ([{"include": "flows/**"}], r"libraries\[0\]: .*write - glob: \{include: flows/\*\*\}"),
        ("flows/**", "libraries must be a list"),
    ],
)
def test_library_mistakes_name_the_spec_and_the_entry(
    project: Path, libraries: object, message: str
) -> None:
    document = spec(sql="SELECT user FROM clicks")
    document["libraries"] = libraries
    path = write(project, document)
    with pytest.raises(UserError, match=message) as error:
        load_pipeline(path)
    assert str(error.value).startswith(str(path))


def test_streamsmith_flow_outside_a_library_says_where_it_belongs() -> None:
    import streamsmith as ss

    with pytest.raises(UserError, match="lists this file under libraries"):
        ss.flow(lambda events: events)


def test_a_source_schema_from_the_spec_reaches_python_flows_and_is_refused_elsewhere(
    tmp_path: Path,
) -> None:
    """A ``schema`` a spec file or ``--set`` gives a source replaces the one a Python
    pipeline's code declared, for every flow parsing it with the default parser; a flow
    that parses its records itself cannot read it, which is an error, not ignored."""
    from streamsmith.apps import get_app
    from streamsmith.config import load_spec

    path = tmp_path / "orders.py"
    path.write_text(
        "import streamsmith as ss\n"
        "pipeline = ss.Pipeline('orders', sources={'orders': {'format': 'jsonl', "
        "'path': 'in', 'schema': 'id string, amount double'}})\n"
        "@pipeline.flow(sink={'table': 'orders'}, required=('id',))\n"
        "def orders(events):\n    return events\n"
    )
    try:
        app, pipeline = load_pipeline(path, sets=["sources.orders.schema=id string, cents long"])
    finally:
        sys.modules.pop("orders", None)
    definition = build_plan(app, pipeline).flows[0].definition
    assert definition.record_schema is not None
    assert definition.record_schema.simpleString() == "struct<id:string,cents:bigint>"
    assert definition.prepare is not None and "cents" in repr(definition.prepare)
    app, pipeline = load_pipeline(path, sets=["sources.orders.schema=cents long"])
    with pytest.raises(UserError, match=r"needs field\(s\) id, which the schema lacks"):
        build_plan(app, pipeline)
    sys.modules.pop("orders", None)

    cloudtrail = get_app("cloudtrail")
    source = next(iter(cloudtrail.default_spec["sources"]))
    given = load_spec(cloudtrail.default_spec, sets=[f"sources.{source}.schema=a string"],
                      storage_root=str(tmp_path))  # fmt: skip
    with pytest.raises(UserError, match=r"\(in --set\): flow .* reading no schema from the spec"):
        build_plan(cloudtrail, given)


def test_the_reference_apps_catalog_says_what_each_app_module_declares() -> None:
    """`streamsmith apps` lists the catalog without importing the apps: it must agree."""
    from streamsmith.apps import REFERENCE_APPS, reference_app

    for name, description in REFERENCE_APPS.items():
        app = reference_app(name)
        assert (app.name, app.description) == (name, description)
