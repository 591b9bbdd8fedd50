"""An SDP project's parts that need no Spark: its spec file found and read as
``spark-pipelines`` does, its SQL files split into graph elements, and flows made in a
``for`` loop keeping each turn's values."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pyspark import pipelines as dp
from pyspark.pipelines.flow import Flow
from pyspark.pipelines.output import MaterializedView, Sink, StreamingTable, TemporaryView
from pyspark.pipelines.source_code_location import SourceCodeLocation
from pyspark.sql import DataFrame
from pyspark.sql.types import IntegerType, StructField, StructType

import sdp_cdc
import sdp_expecting
import sdp_sinks
from streamsmith.config import load_spec, load_spec_file
from streamsmith.config.sdp_project import read_project
from streamsmith.defaults import find_spec
from streamsmith.errors import UserError
from streamsmith.runtime.app import App, FlowDefinition
from streamsmith.runtime.describe import describe_plan
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import full_refresh
from streamsmith.sdp import expectations
from streamsmith.sdp.expectations import Expecting
from streamsmith.sdp.graph import as_registered, load_graph
from streamsmith.sdp.lakeflow import AutoCdc, OnceFlow
from streamsmith.sdp.loader import sink_spec
from streamsmith.sdp.rejects import rejectable
from streamsmith.sdp.session import PipelineSession
from streamsmith.sdp.sql import ExpectingTable, sql_elements, statements

SPEC = """\
name: shop
storage: file:///data/shop-storage
database: sales
configuration:
  spark.sql.shuffle.partitions: "4"
  shop.region: eu
libraries:
  - glob:
      include: transformations/**
  - glob:
      include: extra/one.sql
"""


def write(folder: Path, text: str = SPEC, name: str = "spark-pipeline.yml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return folder / name


def test_the_spec_is_found_from_a_subfolder_and_read_with_its_libraries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = write(tmp_path)
    for name in ("transformations/b.py", "transformations/deep/a.sql", "extra/one.sql"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("", encoding="utf-8")
    (tmp_path / "transformations/__pycache__").mkdir()
    (tmp_path / "transformations/__pycache__/b.cpython-311.pyc").write_text("")
    monkeypatch.chdir(tmp_path / "transformations/deep")
    assert find_spec(None) == spec.resolve()
    assert find_spec(str(tmp_path)) == spec.resolve()

    project = read_project(spec)
    assert (project.name, project.database, project.storage_root) == (
        "shop", "sales", "/data/shop-storage",
    )  # fmt: skip
    assert [p.relative_to(tmp_path) for p in project.files()] == [
        Path("transformations/b.py"),
        Path("transformations/deep/a.sql"),
        Path("extra/one.sql"),
    ]
    # Spark reads spark.* as it starts; the rest the code reads with spark.conf.get
    assert project.spark_settings == {"spark.sql.shuffle.partitions": "4"}
    assert project.code_settings == {"shop.region": "eu"}
    # what status and query read, without the code: name, storage, Spark settings
    read = load_spec_file(spec)
    assert (read.app, str(read.root)) == ("shop", "/data/shop-storage")
    assert read.trigger == "available-now"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (SPEC + "trigger: 10s\n", "unknown key 'trigger' (a spark-pipeline.yml has name,"),
        ("name: shop\n", "storage is required (a string)"),
        (
            "name: s\nstorage: x\nlibraries:\n  - glob:\n      include: t/**/*.py\n",
            "libraries glob 't/**/*.py': use a file's path or a folder ending in /**",
        ),
    ],
)
def test_a_spec_mistake_is_one_line_naming_the_file(tmp_path: Path, text: str, error: str) -> None:
    spec = write(tmp_path, text)
    with pytest.raises(UserError, match="^" + str(spec)) as raised:
        read_project(spec).files()
    assert error in str(raised.value)


def test_two_specs_in_one_folder_are_refused(tmp_path: Path) -> None:
    write(tmp_path)
    write(tmp_path, name="spark-pipeline.yaml")
    with pytest.raises(UserError, match="holds both spark-pipeline.yml and spark-pipeline.yaml"):
        find_spec(str(tmp_path))


SQL = """\
SET spark.sql.ansi.enabled = true;
-- a comment; with a semicolon
CREATE OR REFRESH STREAMING TABLE raw (id INT, name STRING)
COMMENT 'it''s raw' TBLPROPERTIES ('quality' = 'bronze') PARTITIONED BY (name)
AS SELECT * FROM STREAM(source);

CREATE MATERIALIZED VIEW totals CLUSTER BY (name, n)
AS SELECT name, count(*) AS n FROM raw GROUP BY name;
/* a view
   over two lines */
CREATE TEMPORARY VIEW recent AS SELECT * FROM raw WHERE id > 10;
CREATE STREAMING TABLE merged;
CREATE FLOW into_merged AS INSERT INTO merged BY NAME SELECT * FROM STREAM raw
"""


def test_sql_statements_become_datasets_and_flows() -> None:
    assert [s.line for s in statements(SQL)] == [1, 3, 7, 11, 12, 13]
    elements = sql_elements(SQL, Path("t/all.sql"), session=None)  # type: ignore[arg-type]
    classes = (StreamingTable, MaterializedView, TemporaryView, Flow)
    kinds = [(next(c for c in classes if isinstance(e, c)).__name__, e.name) for e in elements]
    assert kinds == [
        ("StreamingTable", "raw"),
        ("Flow", "raw"),
        ("MaterializedView", "totals"),
        ("Flow", "totals"),
        ("TemporaryView", "recent"),
        ("Flow", "recent"),
        ("StreamingTable", "merged"),
        ("Flow", "into_merged"),
    ]
    raw = elements[0]
    assert isinstance(raw, StreamingTable)
    assert (raw.schema, raw.comment, raw.table_properties, raw.partition_cols) == (
        "id INT, name STRING", "it's raw", {"quality": "bronze"}, ["name"],
    )  # fmt: skip
    assert isinstance(elements[2], MaterializedView)
    assert (elements[2].cluster_by, elements[2].partition_cols) == (["name", "n"], None)
    assert isinstance(elements[4], TemporaryView)
    flow = elements[7]
    assert isinstance(flow, Flow)
    assert (flow.target, flow.spark_conf) == ("merged", {"spark.sql.ansi.enabled": "true"})
    assert elements[1].source_code_location.line_number == 3


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("CREATE TABLE t AS SELECT 1", "t/x.sql:1: unsupported SQL statement: CREATE TABLE t"),
        ("\n\nCREATE MATERIALIZED VIEW v", "t/x.sql:3: CREATE MATERIALIZED VIEW v needs AS"),
        (
            "CREATE TEMPORARY VIEW t CLUSTER BY (a) AS SELECT 1",
            "t/x.sql:1: a temporary view takes only COMMENT and AS query",
        ),
    ],
)
def test_unsupported_sql_is_one_line_naming_file_and_line(sql: str, error: str) -> None:
    with pytest.raises(UserError) as raised:
        sql_elements(sql, Path("t/x.sql"), session=None)  # type: ignore[arg-type]
    assert str(raised.value).startswith(error)


def test_flows_made_in_a_loop_keep_their_turn_s_values() -> None:
    made = []
    for region in ("eu", "us"):

        def flow() -> str:
            return f"{region}{suffix()}"  # noqa: B023  (as an SDP file writes it)

        made.append(as_registered(flow))  # type: ignore[arg-type]

    def suffix() -> str:  # defined after the flows, as a helper below them may be
        return "!"

    assert [flow() for flow in made] == ["eu!", "us!"]


def _appender(name: str) -> FlowDefinition:
    def transform(events: DataFrame, **_streams: DataFrame) -> DataFrame:
        return events

    return FlowDefinition(
        name, transform, quarantine=False, record_late=False, appends_with_others=True
    )


def test_append_flows_share_a_table_and_its_full_refresh_resets_them_all(
    tmp_path: Path,
) -> None:
    """The plan an SDP graph makes (see streamsmith.sdp.loader): two flows appending to
    one Delta table, a third reading it; refreshing the table resets all three."""
    sources = {
        "eu_input": {"format": "sdp", "options": {"reads": "json eu"}},
        "us_input": {"format": "sdp", "options": {"reads": "json us"}},
        "events": {"format": "delta", "table": "events"},
    }
    flows = {
        "events_eu": {"source": "eu_input", "sink": {"format": "delta", "table": "events"}},
        "events_us": {"source": "us_input", "sink": {"format": "delta", "table": "events"}},
        "counted": {"source": "events", "sink": {"format": "delta", "table": "counted"}},
    }
    document = {"app": "shop", "storage_root": str(tmp_path), "trigger": "available-now",
                "sources": sources, "flows": flows}  # fmt: skip
    app = App("shop", "", tuple(_appender(name) for name in flows), document)
    plan = build_plan(app, load_spec(document))
    assert {flow.name: plan.upstream(flow) for flow in plan.flows} == {
        "events_eu": set(), "events_us": set(), "counted": {"events_eu", "events_us"},
    }  # fmt: skip
    assert "source eu_input: read by the flow's own code: json eu" in describe_plan(plan)
    for output in plan.outputs:
        output.checkpoint.mkdir(parents=True)
    removed = full_refresh(plan, ["events"])
    assert sorted(Path(p).name for p in removed if "checkpoints" in p) == [
        "counted", "events_eu", "events_us",
    ]  # fmt: skip

    # flows of a pipeline of one's own still write a table each
    alone = App("shop", "", tuple(replace(_appender(n), appends_with_others=False)
                                  for n in flows), document)  # fmt: skip
    with pytest.raises(UserError, match="both write delta 'events'"):
        build_plan(alone, load_spec(document))


def one_table(sql: str) -> ExpectingTable:
    (table, _flow) = sql_elements(sql, Path("t.sql"), session=None)  # type: ignore[arg-type]
    assert isinstance(table, ExpectingTable)
    return table


def test_lakeflow_constraints_become_expectations_beside_the_columns() -> None:
    table = one_table(
        "CREATE STREAMING TABLE t (id INT, CONSTRAINT has_id EXPECT (id IS NOT NULL) "
        "ON VIOLATION DROP ROW, CONSTRAINT small EXPECT (id < f(1, 2)), "
        "CONSTRAINT stop EXPECT (id > 0) ON VIOLATION FAIL UPDATE) AS SELECT 1 AS id"
    )
    assert table.schema == "id INT"
    assert [(e.name, e.sql, e.action) for e in table.expectations] == [
        ("has_id", "id IS NOT NULL", "drop"),
        ("small", "id < f(1, 2)", "warn"),
        ("stop", "id > 0", "fail"),
    ]


def test_a_schema_clause_keeps_nested_types_whole() -> None:
    table = one_table(
        "CREATE STREAMING TABLE t (m MAP<STRING, INT>, s STRUCT<a: INT, b: STRING>, "
        "CONSTRAINT c EXPECT (size(m) > 0)) AS SELECT 1"
    )
    assert table.schema == "m MAP<STRING, INT>, s STRUCT<a: INT, b: STRING>"
    assert [e.sql for e in table.expectations] == ["size(m) > 0"]


AUTO_CDC_SQL = """\
CREATE STREAMING TABLE dim;
CREATE FLOW dim_cdc AS AUTO CDC INTO dim
FROM STREAM changes
KEYS (`id`, region)
APPLY AS DELETE WHEN op = 'SEQUENCE BY' -- a clause's words in a string and a comment
SEQUENCE BY struct(ts, n)
COLUMNS id, region, name, city, ts, n
STORED AS SCD TYPE 2
TRACK HISTORY ON * EXCEPT (name);
"""


def test_an_auto_cdc_flow_in_sql_becomes_streamsmith_s_cdc() -> None:
    _table, flow = sql_elements(AUTO_CDC_SQL, Path("t/cdc.sql"), session=None)  # type: ignore[arg-type]
    assert isinstance(flow, AutoCdc)
    assert (flow.name, flow.target, flow.source, flow.keys, flow.sequence_by) == (
        "dim_cdc", "dim", "changes", ("id", "region"), "struct(ts, n)",
    )  # fmt: skip
    assert flow.apply_as_deletes == "op = 'SEQUENCE BY'"
    assert flow.source_code_location.line_number == 2
    columns = ["id", "region", "name", "city", "ts", "n", "op"]
    assert flow.cdc_block(columns) == {
        "keys": ["id", "region"],
        "sequence_by": "struct(ts, n)",
        "scd_type": 2,
        "except_columns": ["op"],  # what COLUMNS leaves out
        "apply_as_deletes": "op = 'SEQUENCE BY'",
        "track_history_columns": ["city", "ts", "n"],  # all but keys, op and name
    }


@pytest.mark.parametrize(
    ("clauses", "error"),
    [
        ("KEYS (id) SEQUENCE BY seq STORED AS SCD TYPE 3", "the SCD type is 1 or 2, not '3'"),
        ("KEYS (id) SEQUENCE BY seq TRACK HISTORY ON city", "tracking history is for SCD type 2"),
        ("SEQUENCE BY seq", "AUTO CDC needs KEYS ..."),
        ("KEYS (id) IGNORE NULL UPDATES x SEQUENCE BY seq", "unsupported SQL after IGNORE NULL"),
        (
            "KEYS (id) APPLY AS TRUNCATE WHEN op = 'T' SEQUENCE BY seq STORED AS SCD TYPE 2",
            "AUTO CDC flow 'f': apply_as_truncates (APPLY AS TRUNCATE WHEN) is for SCD type 1",
        ),
        ("KEYS (id) SEQUENCE BY seq KEYS (id)", "AUTO CDC has KEYS twice"),
        ("WHERE x KEYS (id) SEQUENCE BY seq", "unsupported SQL in AUTO CDC: WHERE x KEYS"),
    ],
)
def test_an_auto_cdc_mistake_is_one_line_naming_file_and_line(clauses: str, error: str) -> None:
    sql = f"CREATE STREAMING TABLE t;\n\nCREATE FLOW f AS AUTO CDC INTO t FROM s\n{clauses}"
    with pytest.raises(UserError) as raised:
        sql_elements(sql, Path("t/x.sql"), session=None)  # type: ignore[arg-type]
    assert str(raised.value).startswith(f"t/x.sql:3: {error}"), str(raised.value)


def test_create_auto_cdc_flow_takes_lakeflow_s_arguments_and_names_a_mistake_s_line(
    tmp_path: Path,
) -> None:
    code = (
        "from pyspark import pipelines as dp\n"
        "dp.create_streaming_table('dim')\n"
        "dp.create_auto_cdc_flow(target='dim', source='changes', keys=['id'],\n"
        "    sequence_by='seq', stored_as_scd_type=2, track_history_except_column_list=['n'])\n"
        "dp.create_auto_cdc_flow(target='dim', source='changes', keys=['id'], name='again',\n"
        "    sequence_by='seq', track_history_column_list=['city'])\n"
    )
    (tmp_path / "dim.py").write_text(code, encoding="utf-8")
    with pytest.raises(UserError) as raised:
        load_graph([tmp_path / "dim.py"], tmp_path, PipelineSession(None))  # type: ignore[arg-type]
    assert str(raised.value) == (
        f"{tmp_path / 'dim.py'}:5: ValueError: tracking history is for SCD type 2"
    )
    assert dp.create_auto_cdc_flow.__module__ == "pyspark.pipelines.api"  # PySpark's again


@pytest.mark.parametrize(
    ("section", "code"),
    [
        ("### Sinks and once flows", ("python", sdp_sinks.SINKS_PY, "python", sdp_sinks.SINKS_PY)),
        ("### Expectations", ("python", sdp_expecting.EXPECTING_PY)),
        ("### Change data capture", ("python", sdp_cdc.CHANGES_PY, "sql", sdp_cdc.HISTORY_SQL)),
        (
            "### Partial updates, truncations",
            ("python", sdp_cdc.PARTIAL_PY, "sql", sdp_cdc.PARTIAL_SQL),
        ),
        ("### Several AUTO CDC flows into one table", ("python", sdp_cdc.TWO_SOURCES_PY)),
    ],
)
def test_the_guide_s_snippets_are_the_tested_projects(section: str, code: tuple[str, ...]) -> None:
    guide = (Path(__file__).parents[2] / "docs/how-to/coming-from-sdp.md").read_text("utf-8")
    text = guide.split(section)[1].split("\n##")[0]
    blocks = re.findall(r"```(python|sql)\n(.*?)```", text, re.DOTALL)
    assert [kind for kind, _ in blocks] == list(code[::2])
    for (_, snippet), project in zip(blocks, code[1::2], strict=True):
        assert snippet in project


@pytest.mark.parametrize("by_name", [" BY NAME", ""])
def test_insert_into_with_or_without_by_name_is_a_flow_into_the_table(by_name: str) -> None:
    sql = (
        "CREATE STREAMING TABLE t;\n"
        f"CREATE FLOW a AS INSERT INTO t{by_name}\nSELECT * FROM STREAM(west);\n"
        f"CREATE FLOW b AS INSERT INTO ONCE t{by_name} SELECT 1 AS by_name"
    )
    _table, a, b = sql_elements(sql, Path("t/x.sql"), session=None)  # type: ignore[arg-type]
    assert (type(a), a.name, a.target) == (Flow, "a", "t")
    assert (type(b), b.name, b.target) == (OnceFlow, "b", "t")


def test_a_once_flow_in_sql_and_the_sinks_streamsmith_writes() -> None:
    sql = "CREATE STREAMING TABLE t;\nCREATE FLOW old AS INSERT INTO ONCE t BY NAME SELECT 1 AS a"
    _table, once = sql_elements(sql, Path("t/x.sql"), session=None)  # type: ignore[arg-type]
    assert isinstance(once, OnceFlow)
    assert (once.name, once.target) == ("old", "t")
    here = SourceCodeLocation("t/x.py", 3)
    assert sink_spec(Sink("out", None, here, "delta", {"path": "/lake/out"}), "x") == {
        "format": "delta", "table": "out", "path": "/lake/out",
    }  # fmt: skip
    assert sink_spec(Sink("out", None, here, "delta", {"tableName": "db.kept"}), "x") == {
        "format": "delta", "table": "kept",
    }  # fmt: skip
    kafka = Sink("out", None, here, "kafka", {"kafka.bootstrap.servers": "h:9092", "topic": "o"})
    assert sink_spec(kafka, "x") == {
        "format": "kafka", "topic": "o", "options": {"kafka.bootstrap.servers": "h:9092"},
    }  # fmt: skip
    with pytest.raises(UserError, match="^t/x.py:3: sink 'out' has format 'parquet'"):
        sink_spec(Sink("out", None, here, "parquet", {}), "t/x.py:3")


def test_expectation_decorators_mark_the_function_top_to_bottom() -> None:
    @expectations.expect_or_fail("a", "x > 0")
    @expectations.expect_all_or_drop({"b": "y IS NOT NULL", "c": "z < 3"})
    def table() -> None: ...

    assert expectations.declared(table) == (
        Expecting("a", "x > 0", "fail"), Expecting("b", "y IS NOT NULL", "drop"),
        Expecting("c", "z < 3", "drop"),
    )  # fmt: skip
    with pytest.raises(TypeError, match="goes below @dp.table"):
        expectations.expect("a", "x > 0")(None)  # type: ignore[type-var]


def test_strings_quoted_names_and_nesting_are_sql_s_tokens_not_syntax() -> None:
    table = one_table(
        "CREATE STREAMING TABLE t (`a,b` INT, CONSTRAINT few EXPECT (`a,b`<3), n STRING, "
        "CONSTRAINT odd EXPECT (n <> 'x, (y') ON VIOLATION DROP ROW) "
        "TBLPROPERTIES ('note' = 'a, b)', 'q' = '1') AS SELECT 1 AS `a,b`, 'z' AS n"
    )
    assert table.schema == "`a,b` INT, n STRING"
    assert [(e.name, e.sql) for e in table.expectations] == [
        ("few", "`a,b`<3"), ("odd", "n <> 'x, (y'"),
    ]  # fmt: skip
    assert table.table_properties == {"note": "a, b)", "q": "1"}
    for sql, error in (
        ("\nCREATE STREAMING TABLE t (id INT AS SELECT 1", "2: unbalanced parentheses in (id"),
        ("CREATE STREAMING TABLE t (n STRING COMMENT 'oops) AS SELECT 1", "1: Error tokenizing"),
    ):
        with pytest.raises(UserError) as raised:
            sql_elements(sql, Path("t/x.sql"), None)  # type: ignore[arg-type]
        assert str(raised.value).startswith(f"t/x.sql:{error}"), str(raised.value)


@pytest.mark.parametrize(
    ("source", "schema", "options", "expected"),
    [
        ("json", "id INT, name STRING", {}, True),
        ("CSV", StructType([StructField("id", IntegerType())]), {"header": "true"}, True),
        ("json", "id INT", {"mode": "permissive"}, True),
        ("json", None, {}, False),  # inferred: nothing to tell a malformed record by
        ("parquet", "id INT", {}, False),
        ("json", "id INT", {"mode": "DROPMALFORMED"}, False),
        ("csv", "id INT", {"mode": "FAILFAST"}, False),
        ("json", "id INT, bad STRING", {"columnNameOfCorruptRecord": "bad"}, False),
        ("json", "id INT, _corrupt_record STRING", {}, False),  # the user keeps them
    ],
)
def test_a_read_keeps_its_rejects_only_where_spark_would_null_them_silently(
    source: str, schema: Any, options: dict[str, str], expected: bool
) -> None:
    assert rejectable(source, schema, options) is expected
