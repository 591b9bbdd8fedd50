"""The spec's ``maintenance``, before Spark: what each key takes, how a flow's block
sits over the pipeline's, and the retention the plan refuses."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from streamsmith.errors import UserError
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.describe import describe_plan
from streamsmith.runtime.maintenance import longest_gap
from streamsmith.runtime.plan import Plan, build_plan

SPEC: dict[str, Any] = {
    "name": "shop",
    "storage_root": "data",
    "trigger": "available-now",
    "maintenance": {"vacuum": "0 4 * * *", "retain": "2 days"},
    "sources": {"orders": {"format": "jsonl", "path": "input",
                           "schema": "order_id string, customer string, amount int"}},
    "flows": {
        "orders": {"source": "orders", "sql": "SELECT * FROM orders", "sink": {"table": "orders"},
                   "maintenance": {"optimize": "after_run"}},
        "totals": {"source": "orders",
                   "sql": "SELECT customer, sum(amount) AS amount FROM orders GROUP BY customer",
                   "sink": {"table": "totals", "output_mode": "update", "keys": ["customer"]}},
        "served": {"source": "orders", "sql": "SELECT * FROM orders",
                   "sink": {"format": "memory", "table": "served"}},
    },
}  # fmt: skip


def plan_of(folder: Path, *sets: str, document: dict[str, Any] | None = None) -> Plan:
    (folder / "data/input").mkdir(parents=True, exist_ok=True)
    (folder / "streamsmith.yml").write_text(yaml.safe_dump(document or SPEC))
    return build_plan(*load_pipeline(folder / "streamsmith.yml", sets=sets))


def test_a_flows_block_sits_key_by_key_over_the_pipelines(tmp_path: Path) -> None:
    plan = plan_of(tmp_path)
    tasks = {task.table: task for flow in plan.flows for task in flow.maintenance}

    # The flow's tables, its quarantine too; the memory table is no Delta table.
    assert sorted(tasks) == ["orders", "orders_quarantine", "totals"]
    orders, quarantine, totals = tasks["orders"], tasks["orders_quarantine"], tasks["totals"]
    assert (orders.optimize, orders.vacuum, orders.retain_hours) == ("after_run", "0 4 * * *", 48)
    assert (totals.optimize, totals.vacuum, totals.retain_hours) == (None, "0 4 * * *", 48)
    assert orders.query == quarantine.query == "shop.orders"
    assert plan.maintenance_crons == {"0 4 * * *": (orders, quarantine, totals)}
    assert "maintenance of table orders: optimize after_run, vacuum 0 4 * * *, retain 48 hours" in (
        describe_plan(plan)
    )
    # A catch-up without a schedule keeps no cron: it says so, and what runs them.
    assert any("runs on a cron" in warning for warning in plan.warnings)


@pytest.mark.parametrize(
    ("setting", "error"),
    [
        ("flows.orders.maintenance.retain=90 minutes", "whole hours, at least 1 hour"),
        ("flows.orders.maintenance.retain=0h", "whole hours, at least 1 hour"),
        ("flows.orders.maintenance.optimize=sometimes", "or after_run"),
        ("maintenance.vacuum=99 * * * *", "invalid schedule '99 * * * *'"),
        ("flows.orders.maintenance.target_file_mb=0", "greater than 0"),
        ("flows.orders.maintenance.zorder=x", "zorder"),
    ],
)
def test_nonsense_is_refused_naming_its_key(tmp_path: Path, setting: str, error: str) -> None:
    with pytest.raises(UserError) as raised:
        plan_of(tmp_path, setting)
    key = setting.split("=", maxsplit=1)[0]
    assert key in str(raised.value) and error in str(raised.value)


def test_after_run_needs_catch_ups_and_a_flows_block_a_delta_table(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"flows\.orders\.maintenance .*optimize: after_run runs "
                       r"after each catch-up run .* runs always on"):  # fmt: skip
        plan_of(tmp_path, "flows.orders.trigger=interval=10s")
    with pytest.raises(UserError, match=r"flows\.served\.maintenance .*writes no Delta table"):
        plan_of(tmp_path, "flows.served.maintenance.optimize=0 3 * * *")


def test_retain_must_cover_the_runs_of_a_scheduled_flow_reading_the_table(
    tmp_path: Path,
) -> None:
    document = copy.deepcopy(SPEC)
    document["flows"]["gold"] = {
        "source": "orders_table",
        "sql": "SELECT customer, count(*) AS orders FROM orders_table GROUP BY customer",
        "sink": {"table": "gold", "output_mode": "update", "keys": ["customer"]},
        "schedule": "0 2 * * 1",  # weekly: it reads the orders table once a week
    }
    document["sources"]["orders_table"] = {"format": "delta", "table": "orders"}

    with pytest.raises(UserError) as raised:
        plan_of(tmp_path, document=document)
    assert str(raised.value).startswith("maintenance.retain (in ") and str(raised.value).endswith(
        "48 hours is shorter than the 7 days between two runs of flow 'gold' (schedule "
        "'0 2 * * 1'), which reads table 'orders' as a stream: VACUUM would have to keep "
        "the files of every version that flow has not read yet; set retain to at least 7 days"
    )
    plan = plan_of(tmp_path, "flows.orders.maintenance.retain=7 days", document=document)
    assert {t.table: t.retain_hours for f in plan.flows for t in f.maintenance}["orders"] == 168
    assert not plan.warnings  # a scheduled run stays up: it keeps the crons


def test_the_longest_gap_of_a_cron() -> None:
    assert longest_gap("*/15 * * * *") == 900
    assert longest_gap("0 2 * * *") == 86400
    assert longest_gap("0 0 1 * *") == 31 * 86400


def test_keep_rejected_expires_the_quarantine_with_vacuum_and_never_under_a_stream(
    tmp_path: Path,
) -> None:
    plan = plan_of(tmp_path, "maintenance.keep_rejected=30 days")
    tasks = {task.table: task for flow in plan.flows for task in flow.maintenance}
    # Only the rejected rows expire, when vacuum runs; the flow's own tables keep theirs.
    assert tasks["orders_quarantine"].expire_hours == 720
    assert tasks["orders_quarantine"].operations("0 4 * * *") == ("expire", "vacuum")
    assert tasks["orders"].expire_hours is None and tasks["totals"].expire_hours is None
    assert "expire" not in tasks["orders"].operations()

    with pytest.raises(UserError, match="keep_rejected deletes old quarantine and late rows "
                                        "when vacuum runs: set vacuum too"):  # fmt: skip
        plan_of(tmp_path, "maintenance.keep_rejected=30 days", "maintenance.vacuum=null")
    with pytest.raises(UserError, match="give whole hours"):
        plan_of(tmp_path, "maintenance.keep_rejected=90 minutes")

    # A flow reading the quarantine as a stream would stop at the first expiry.
    document = copy.deepcopy(SPEC)
    document["sources"]["rejects"] = {"format": "delta", "path": "tables/orders_quarantine"}
    document["flows"]["triage"] = {"source": "rejects", "sql": "SELECT reason FROM rejects",
                                   "sink": {"table": "triage"}}  # fmt: skip
    with pytest.raises(UserError, match="flow 'triage' reads it as a stream .*ignoreDeletes"):
        plan_of(tmp_path, "maintenance.keep_rejected=30 days", document=document)
    document["sources"]["rejects"]["options"] = {"ignoreDeletes": "true"}
    plan_of(tmp_path, "maintenance.keep_rejected=30 days", document=document)


def test_log_retain_reaches_every_table_and_never_undercuts_retain(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "maintenance.log_retain=3 days")
    tasks = {task.table: task for flow in plan.flows for task in flow.maintenance}
    assert {name: task.log_retain_hours for name, task in tasks.items()} == {
        "orders": 72, "orders_quarantine": 72, "totals": 72
    }  # fmt: skip
    assert all(task.log_retain_hours is None for task in plan_of(tmp_path).flows[0].maintenance)
    with pytest.raises(UserError) as raised:
        plan_of(tmp_path, "maintenance.log_retain=1 day")  # retain is 2 days
    assert str(raised.value).startswith("maintenance.log_retain (in ") and str(
        raised.value
    ).endswith(
        "1 day is shorter than retain (2 days): time travel within retain reads the log of "
        "those versions"
    )
    with pytest.raises(UserError, match="whole hours"):
        plan_of(tmp_path, "maintenance.log_retain=30 minutes")
