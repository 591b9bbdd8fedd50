"""A flow with several sinks, checked and planned before Spark starts: one query per sink,
the first keeping the flow's name and checkpoint, one quarantine and late query."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

import streamsmith as ss
from streamsmith.config import load_spec
from streamsmith.errors import UserError
from streamsmith.monitor.status_view import flow_of
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.describe import describe_plan
from streamsmith.runtime.plan import Plan, build_plan

SPEC: dict[str, Any] = {
    "name": "actions",
    "storage_root": "data",
    "sources": {"actions": {"format": "jsonl", "path": "input/actions",
                            "schema": "action string, ts timestamp"}},
    "flows": {
        "action_counts": {
            "sql": "SELECT action, window.start AS window_start, count(*) AS count "
                   "FROM actions GROUP BY window, action",
            "event_time": {"column": "ts", "lateness": "10 minutes", "window": "1 hour"},
            "expect": {"known": {"sql": "action IN ('open', 'close')", "action": "quarantine"}},
            "sinks": {
                "serving": {"format": "postgres", "table": "action_counts",
                            "output_mode": "update", "key": ["action", "window_start"]},
                "lake": {"format": "delta", "table": "action_counts", "output_mode": "append"},
            },
        },
        # Reads the table the further sink writes, as a stream (multi-hop).
        "busy_hours": {"source": "action_counts",
                       "sql": "SELECT window_start FROM action_counts WHERE count > 10",
                       "sink": {"table": "busy_hours"}},
    },
}  # fmt: skip


def plan_of(tmp_path: Path, document: dict[str, Any]) -> Plan:
    path = tmp_path / "streamsmith.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return build_plan(*load_pipeline(path))


def changed(**flow: Any) -> dict[str, Any]:
    """``SPEC``'s flow action_counts alone, its keys replaced (None removes one)."""
    document = copy.deepcopy(SPEC)
    del document["flows"]["busy_hours"]
    target = document["flows"]["action_counts"]
    for key, value in flow.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    return document


def test_each_sink_is_a_query_the_first_keeping_the_flows_name_and_checkpoint(
    tmp_path: Path,
) -> None:
    plan = plan_of(tmp_path, SPEC)
    counts = next(flow for flow in plan.flows if flow.name == "action_counts")
    checkpoints = tmp_path / "data/checkpoints/actions"
    backfill = tmp_path / "data/backfill"
    assert [
        (o.query_name, o.role, o.name, o.kind, o.output_mode, o.checkpoint, o.backfill_path)
        for o in counts.outputs
    ] == [
        ("actions.action_counts", "main", "serving", "postgres", "update",
         checkpoints / "action_counts", backfill / "action_counts"),
        ("actions.action_counts.lake", "sink", "lake", "table", "append",
         checkpoints / "action_counts__lake", backfill / "action_counts__lake"),
        ("actions.action_counts.quarantine", "quarantine", None, "quarantine", "append",
         checkpoints / "action_counts__quarantine", backfill / "action_counts_quarantine"),
        ("actions.action_counts.late", "late", None, "late", "append",
         checkpoints / "action_counts__late", backfill / "action_counts_late"),
    ]  # fmt: skip
    assert [o.query_name for o in counts.sinks] == [
        "actions.action_counts",
        "actions.action_counts.lake",
    ]
    # The flow reading the further sink's Delta table follows it.
    assert [flow.name for flow in plan.flows] == ["action_counts", "busy_hours"]
    assert plan.upstream(plan.flows[1]) == {"action_counts"}
    shown = describe_plan(plan)
    assert "postgres query actions.action_counts: sink serving: postgres table public." in shown
    assert "table query actions.action_counts.lake: sink lake: delta " in shown
    assert "action_counts -> busy_hours (table action_counts, appended rows)" in shown


def test_a_single_sink_plans_as_before(tmp_path: Path) -> None:
    document = changed(sinks=None, sink={"table": "action_counts", "output_mode": "append"})
    counts = plan_of(tmp_path, document).flows[0]
    assert [(o.query_name, o.role, o.name) for o in counts.outputs] == [
        ("actions.action_counts", "main", None),
        ("actions.action_counts.quarantine", "quarantine", None),
        ("actions.action_counts.late", "late", None),
    ]
    assert counts.outputs[0].checkpoint.name == "action_counts"


@pytest.mark.parametrize(
    ("flow", "message"),
    [
        ({"sink": {"table": "x"}}, "the flow has both sink and sinks"),
        ({"sinks": None}, "the flow has neither sink nor sinks"),
        ({"sinks": {}}, "sinks is empty"),
        ({"sinks": {"quarantine": {"table": "x"}}}, "sink name 'quarantine' must be an"),
        ({"sinks": {"to-pg": {"table": "x"}}}, "sink name 'to-pg' must be an identifier"),
    ],
)
def test_sink_or_sinks_mistakes_name_the_flow(
    tmp_path: Path, flow: dict[str, Any], message: str
) -> None:
    with pytest.raises(UserError) as raised:
        plan_of(tmp_path, changed(**flow))
    assert "flows.action_counts" in str(raised.value)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_what_several_sinks_cannot_do_is_refused_naming_the_flow(tmp_path: Path) -> None:
    twice = {"a": {"table": "t"}, "b": {"table": "t"}}
    with pytest.raises(
        UserError,
        match=r"'action_counts \(sink a\)' and 'action_counts \(sink b\)' both write delta 't'",
    ):
        plan_of(tmp_path, changed(sinks=twice, expect=None))
    cdc = changed(sql="SELECT action, ts FROM actions", event_time=None, expect=None,
                  cdc={"keys": ["action"], "sequence_by": "ts"}, sinks=twice)  # fmt: skip
    cdc["flows"]["action_counts"]["sinks"]["b"] = {"table": "u"}
    with pytest.raises(UserError, match="flow 'action_counts' of app 'actions' has 2 sinks, but a"):
        plan_of(tmp_path, cdc)
    topics = {"a": {"format": "kafka", "topic": "a"}, "b": {"format": "kafka", "topic": "b"}}
    real_time = changed(sql="SELECT action AS key, action AS value FROM actions",
                        event_time=None, expect=None, trigger="real-time",
                        sinks=topics)  # fmt: skip
    real_time["kafka"] = {"bootstrap_servers": "127.0.0.1:9092"}
    real_time["sources"]["actions"] = {"format": "kafka", "options": {"subscribe": "actions"},
                                       "schema": "action string, ts timestamp"}  # fmt: skip
    with pytest.raises(
        UserError, match="has 2 sinks, but trigger real-time=60s runs a flow as one query"
    ):
        plan_of(tmp_path, real_time)
    clash = changed(sinks={"main": {"table": "a"}, "b": {"table": "b"}}, expect=None)
    clash["flows"] = {**clash["flows"], "action_counts__b": {"sql": "SELECT * FROM actions",
                                                             "sink": {"table": "c"}}}  # fmt: skip
    with pytest.raises(UserError, match="would share the checkpoint"):
        plan_of(tmp_path, clash)


def test_the_later_layer_says_whether_a_flow_has_sink_or_sinks() -> None:
    default = {"app": "a", "sources": {"s": {"format": "rate"}},
               "flows": {"f": {"source": "s", "sink": {"table": "f"}}}}  # fmt: skip
    sinks = {"one": {"table": "f"}, "two": {"table": "g"}}
    several = {"flows": {"f": {"source": "s", "sinks": sinks}}}
    spec = load_spec(default, overrides=several)
    assert spec.flows["f"].sink is None
    assert [name for name, _ in spec.flows["f"].named_sinks] == ["one", "two"]
    back = load_spec({**default, "flows": several["flows"]}, sets=["flows.f.sink.format=console"])
    assert back.flows["f"].sinks is None
    assert back.flows["f"].main_sink.format == "console"


def test_the_python_api_takes_sinks() -> None:
    pipeline = ss.Pipeline("orders", sources={"orders": {"format": "rate"}})
    sinks = {"pg": {"format": "postgres", "table": "t", "output_mode": "update"},
             "lake": {"table": "t"}}  # fmt: skip

    @pipeline.flow(sinks=sinks)
    def totals(orders: Any) -> Any:
        return orders

    assert pipeline.default_spec["flows"]["totals"]["sinks"] == sinks
    with pytest.raises(UserError, match="flow 'both': give sink .* or sinks .*, not both"):
        pipeline.flow(name="both", sink={"table": "x"}, sinks=sinks)(totals)


def test_status_groups_a_further_sinks_query_under_its_flow() -> None:
    assert flow_of("a", "a.f.lake") == ("f", "lake")
    assert flow_of("a", "a.f") == ("f", "main")
    assert flow_of("a", "a.f.quarantine") == ("f", "quarantine")
