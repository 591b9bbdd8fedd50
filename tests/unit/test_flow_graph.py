"""Multi-hop pipelines, planned without Spark: a flow reads another flow's Delta table
as a stream; the plan orders flows by what they read and refuses what cannot run."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from streamsmith.errors import UserError
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.describe import describe_plan, graph_edges
from streamsmith.runtime.graph import dependency_order
from streamsmith.runtime.plan import Plan, build_plan

# Declared gold first: the plan, not the spec's order, decides which flow starts first.
SHOP: dict[str, Any] = {
    "name": "shop",
    "storage_root": "data",
    "sources": {
        "raw_orders": {"format": "jsonl", "path": "input/orders",
                       "schema": "order_id string, customer string, amount double"},
        "totals_feed": {"format": "delta", "table": "totals", "read_change_feed": True},
    },
    "flows": {
        "history": {"source": "totals_feed", "sql": "SELECT * FROM totals_feed",
                    "sink": {"format": "delta", "table": "history"}},
        "totals": {"source": "cleaned",
                   "sql": "SELECT customer, count(*) AS n FROM cleaned GROUP BY customer",
                   "sink": {"format": "delta", "table": "totals", "output_mode": "update",
                            "keys": ["customer"]}},
        "cleaned": {"source": "raw_orders", "sql": "SELECT * FROM raw_orders",
                    "sink": {"format": "delta", "table": "cleaned"}},
    },
}  # fmt: skip


def plan_of(tmp_path: Path, document: dict[str, Any]) -> Plan:
    path = tmp_path / "streamsmith.yml"
    path.write_text(yaml.safe_dump(document))
    app, spec = load_pipeline(path)
    return build_plan(app, spec)


def changed(**flows: dict[str, Any]) -> dict[str, Any]:
    document = copy.deepcopy(SHOP)
    for name, keys in flows.items():
        document["flows"][name].update(keys)
    return document


def test_flows_start_upstream_first_and_dry_run_draws_the_graph(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, SHOP)

    assert [flow.name for flow in plan.flows] == ["cleaned", "totals", "history"]
    assert {flow.name: plan.upstream(flow) for flow in plan.flows} == {
        "cleaned": set(), "totals": {"cleaned"}, "history": {"totals"},
    }  # fmt: skip
    assert [flow.name for flow in plan.downstream({"totals"})] == ["totals", "history"]
    totals = plan.flows[1]
    assert totals.source.format == "delta" and totals.source.table == "cleaned"
    assert totals.source_path == tmp_path / "data/tables/cleaned"
    text = describe_plan(plan)
    assert text.endswith(
        "dependency graph (sources -> flows -> what they write; flows start in this order):\n"
        "  source raw_orders -> cleaned\n"
        "  cleaned -> table cleaned, quarantine cleaned_quarantine\n"
        "  cleaned -> totals (table cleaned, appended rows)\n"
        "  totals -> table totals\n"
        "  totals -> history (table totals, its change data feed)\n"
        "  history -> table history"
    )
    source = tmp_path / "data/tables/totals"
    assert f"source totals_feed: delta table totals at {source}, as a stream of its change" in text
    # The same edges, as each run records them for the dashboard to draw.
    assert [(e.source, e.source_kind, e.target, e.target_kind) for e in graph_edges(plan)] == [
        ("raw_orders", "source", "cleaned", "flow"),
        ("cleaned", "flow", "totals", "flow"),
        ("totals", "flow", "history", "flow"),
    ]


def test_dry_run_draws_the_graph_of_a_single_flow_too(tmp_path: Path) -> None:
    """A one-hop pipeline has a graph as well: how a user checks what they wrote."""
    document = copy.deepcopy(SHOP)
    document["sources"] = {"raw_orders": SHOP["sources"]["raw_orders"]}
    document["flows"] = {"cleaned": SHOP["flows"]["cleaned"]}
    assert describe_plan(plan_of(tmp_path, document)).endswith(
        "dependency graph (sources -> flows -> what they write; flows start in this order):\n"
        "  source raw_orders -> cleaned\n"
        "  cleaned -> table cleaned, quarantine cleaned_quarantine"
    )


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            changed(cleaned={"source": "totals"}),
            "flows cleaned -> totals -> cleaned read each other's tables in a cycle",
        ),
        (
            changed(history={"source": "totals"}),
            "flow 'history' reads table 'totals' (source 'totals'), which flow 'totals' "
            "merges rows into it (update mode): read its changes with "
            "sources.totals.read_change_feed: true",
        ),
        (  # a cdc flow's sink is in append mode, yet its table changes rows
            changed(
                cleaned={"cdc": {"keys": ["order_id"], "sequence_by": "amount"}},
                totals={
                    "sql": "SELECT * FROM cleaned",
                    "sink": {"format": "delta", "table": "totals"},
                },
            ),
            "flow 'totals' reads table 'cleaned' (source 'cleaned'), which flow 'cleaned' "
            "merges its changes into it (cdc): read its changes with "
            "sources.cleaned.read_change_feed: true",
        ),
        (
            changed(cleaned={"sink": {"format": "parquet", "table": "cleaned"}}),
            "flow 'totals' reads table 'cleaned' (source 'cleaned'), which flow 'cleaned' "
            "writes as parquet: a table read as a stream must be Delta",
        ),
        (
            changed(totals={"source": "clened"}),
            "flow 'totals' reads source 'clened', which is neither a source nor a table of a "
            "flow (sources: raw_orders, totals_feed; tables: cleaned, history, totals)",
        ),
    ],
)
def test_what_cannot_run_is_one_line_before_spark(
    tmp_path: Path, document: dict[str, Any], message: str
) -> None:
    with pytest.raises(UserError) as refused:
        plan_of(tmp_path, document)
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_delta_source_names_a_table_or_a_path_and_delta_options_only(tmp_path: Path) -> None:
    document = copy.deepcopy(SHOP)
    document["sources"]["totals_feed"] = {"format": "delta", "table": "nowhere"}
    with pytest.raises(UserError, match="reads table 'nowhere' .source 'totals_feed'., which no"):
        plan_of(tmp_path, document)
    document["sources"]["totals_feed"] = {"format": "delta", "path": "/elsewhere/t",
                                          "options": {"startingVersion": 3}}  # fmt: skip
    plan = plan_of(tmp_path, document)
    history = next(flow for flow in plan.flows if flow.name == "history")
    assert history.source_path == Path("/elsewhere/t") and not plan.upstream(history)
    document["sources"]["totals_feed"]["options"] = {"startingVersoin": 3}
    with pytest.raises(UserError, match="streaming source has no option.s. startingVersoin"):
        plan_of(tmp_path, document)
    document["sources"]["totals_feed"] = {"format": "delta", "table": "t", "path": "/t"}
    with pytest.raises(UserError, match="give exactly one"):
        plan_of(tmp_path, document)


def test_dependency_order_keeps_the_given_order_where_nothing_is_read() -> None:
    assert dependency_order({"b": [], "a": [], "c": ["a"]}) == ["b", "a", "c"]
    assert dependency_order({"gold": ["silver"], "silver": ["bronze"], "bronze": []}) == [
        "bronze", "silver", "gold",
    ]  # fmt: skip
    with pytest.raises(UserError, match="flows a -> a read each other's tables in a cycle"):
        dependency_order({"a": ["a"]})
