"""The public authoring API: decorators register flows and compose the default spec."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pyspark.sql import DataFrame

import streamsmith as ss
from streamsmith.config import load_spec
from streamsmith.errors import UserError
from streamsmith.runtime.describe import describe_plan
from streamsmith.runtime.plan import build_plan

SCHEMA = "order_id string, amount double, ts timestamp"


def orders_pipeline() -> ss.Pipeline:
    pipeline = ss.Pipeline(
        "orders",
        description="order totals",
        sources={"orders": {"format": "jsonl", "path": "input/orders", "schema": SCHEMA}},
        trigger="available-now",
    )

    @pipeline.flow(
        source="orders",
        sink={"table": "order_totals", "output_mode": "append"},
        required=("order_id",),
        event_time=ss.EventTime("ts", lateness="10m", window="5 minutes"),
        expect={"positive": ss.Expect("amount > 0", "drop"), "known": "order_id <> ''"},
    )
    def order_totals(orders: DataFrame) -> DataFrame:
        """Total amount per 5-minute window."""
        return orders.groupBy("window").sum("amount")

    @pipeline.flow(source="orders", sink={"format": "console"})
    def big_orders(orders: DataFrame) -> DataFrame:
        return orders.where("amount > 100")

    return pipeline


def test_decorators_register_flows_and_compose_the_default_spec(tmp_path: Path) -> None:
    pipeline = orders_pipeline()
    app = pipeline.app
    assert [flow.name for flow in app.flows] == ["order_totals", "big_orders"]
    totals, big = app.flows
    # Both parse by the source's schema; the first flow's parser requires its event time.
    assert totals.prepare is not None and big.prepare is not None
    assert totals.prepare.required == ("order_id", "ts")  # type: ignore[attr-defined]
    assert big.prepare.required == ()  # type: ignore[attr-defined]
    assert (totals.quarantine, big.quarantine) == (True, True)
    assert totals.stateful and not big.stateful
    assert totals.description == "Total amount per 5-minute window."
    assert [(e.name, e.action) for e in totals.expectations] == [
        ("positive", "drop"),
        ("known", "warn"),
    ]
    assert app.default_spec == {
        "app": "orders",
        "trigger": "available-now",
        "sources": {"orders": {"format": "jsonl", "path": "input/orders", "schema": SCHEMA}},
        "flows": {
            "order_totals": {
                "source": "orders",
                "sink": {"table": "order_totals", "output_mode": "append"},
            },
            "big_orders": {"source": "orders", "sink": {"format": "console"}},
        },
    }
    spec = load_spec(
        app.default_spec,
        sets=["flows.order_totals.event_time.lateness=1 hour"],
        storage_root=str(tmp_path),
    )
    plan = build_plan(app, spec)
    assert plan.flows[0].definition.event_time == ss.EventTime("ts", "1 hour", "5 minutes")
    text = describe_plan(plan)
    assert "event time: ts watermark 1 hour, windows 5 minutes" in text
    assert "late query orders.order_totals.late" in text


def test_the_decorated_function_stays_a_plain_function() -> None:
    pipeline = ss.Pipeline("p")

    def per_user(events: DataFrame) -> DataFrame:
        return events

    assert pipeline.flow(per_user) is per_user
    assert pipeline.flow(name="again")(per_user) is per_user
    assert [flow.name for flow in pipeline.flows] == ["per_user", "again"]


@pytest.mark.parametrize(
    ("declare", "message"),
    [
        (lambda p: p.flow(schema="a integr")(lambda e: e), "name the flow"),
        (lambda p: p.flow(name="f", schema="a integr")(lambda e: e), "flow 'f': schema:"),
        (lambda p: p.flow(name="f", expect={"x": ss.Expect("a", "explode")}), "choose one of"),
        (lambda p: p.flow(name="f", expect={"not ok": "a > 1"})(len), "must be an identifier"),
        (lambda p: ss.EventTime("ts", "soon"), "event time lateness: invalid duration"),
        (lambda p: ss.EventTime("ts", "1h", slide="1m"), "set window too"),
        (lambda p: p.app, "declares no flow"),
    ],
)
def test_mistakes_are_named_where_they_are_made(declare: object, message: str) -> None:
    pipeline = ss.Pipeline("p")
    with pytest.raises(UserError, match=message):
        declare(pipeline)  # type: ignore[operator]


def test_a_flow_declared_twice_is_an_error() -> None:
    pipeline = ss.Pipeline("p")
    pipeline.flow(name="f")(len)
    with pytest.raises(UserError, match="declares flow 'f' twice"):
        pipeline.flow(name="f")(len)


def test_the_package_loads_the_api_on_first_use_only() -> None:
    """``import streamsmith`` (what every CLI command does) imports nothing of its own, so
    the command line does not pay for PySpark; the public names load when first used."""
    tree = ast.parse(Path(ss.__file__).read_text(encoding="utf-8"))
    eager = {
        node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
    }
    assert eager == {"__future__", "importlib", "typing"}
    assert ss.Pipeline.__module__ == "streamsmith.api"
    assert {ss.EventTime, ss.Expect, ss.Stream, ss.Sink} and set(ss.__all__) >= {"Pipeline"}
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = ss.nothing  # type: ignore[attr-defined]


def test_a_function_that_cannot_take_its_inputs_is_refused_at_plan_time(tmp_path: Path) -> None:
    pipeline = ss.Pipeline("p", sources={"s": {"format": "jsonl", "path": "in"}})

    @pipeline.flow(source="s", sink={"table": "t"}, lookups=("assets",))
    def joined(events: DataFrame) -> DataFrame:  # forgot the lookup
        return events

    spec = load_spec(pipeline.app.default_spec, storage_root=str(tmp_path))
    with pytest.raises(UserError, match="must take the events and, by keyword, assets"):
        build_plan(pipeline.app, spec)


def test_a_python_pipelines_source_parses_by_its_schema_evolution_mode() -> None:
    """The spec's modes reach a Python pipeline's parser as they reach a spec's: a mode
    that stops or counts on new fields tags them (the runtime relies on it)."""
    import streamsmith as ss

    for mode, tags in (("fail_on_new_columns", True), ("none", True), ("rescue", False)):
        pipeline = ss.Pipeline("p", sources={"s": {"format": "jsonl", "path": "in",
                                                   "schema": "id string",
                                                   "schema_evolution": mode}})  # fmt: skip
        pipeline.flow(lambda events: events, name="f", sink={"table": "t"})
        parser = pipeline.flows[0].prepare
        assert getattr(parser, "evolve", None) is tags
        assert getattr(parser, "rescue", None) is (mode == "rescue")


PIPELINE_FILE = """
import streamsmith as ss

pipeline = ss.Pipeline(
    "p", sources={"s": {"format": "jsonl", "path": "in", "schema": "id string"}},
    spec=%r,
)
pipeline.flow(lambda events: events, name="f", sink={"table": "t"})
"""


@pytest.mark.parametrize(
    ("spec", "root"),
    [
        ({"storage_root": "data"}, "{folder}/data"),  # from the file's folder, as in YAML
        ({"storage_root": "/srv/lake"}, "/srv/lake"),
        ({}, "{folder}/streamsmith-data"),
    ],
)
def test_a_python_pipelines_storage_root_is_honoured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: dict[str, str], root: str
) -> None:
    from streamsmith.pipelines import load_pipeline

    monkeypatch.delenv("STREAMSMITH_ROOT", raising=False)
    path = tmp_path / f"root_pipeline_{len(spec)}_{len(root)}.py"  # a module name per case
    path.write_text(PIPELINE_FILE % spec)
    _, loaded = load_pipeline(path)
    assert loaded.storage_root == root.format(folder=tmp_path)
    _, given = load_pipeline(path, storage_root=str(tmp_path / "cli"))  # --root still wins
    assert given.storage_root == str(tmp_path / "cli")
