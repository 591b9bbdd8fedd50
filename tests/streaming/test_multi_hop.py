"""A three-hop pipeline (raw files -> cleaned -> totals, and the totals' change feed into
their history) runs always-on and as catch-ups into the same tables; a full refresh of
the middle table rebuilds the tables downstream of it; a backfill runs hop by hop."""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from hops import (
    BIG_ORDERS,
    BIG_TOTALS,
    CLEANED,
    SPEC,
    TOTALS,
    deliver,
    latest_per_customer,
    write_project,
)
from inprocess import in_project, invoke
from streamsmith.config import Trigger
from streamsmith.io.lake import read_table
from streamsmith.io.lake_paths import is_delta
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import backfill, full_refresh, run_pipeline
from waiting import wait_for


def rows(spark: SparkSession, path: Path) -> list[tuple[Any, ...]]:
    return sorted(tuple(row) for row in read_table(spark, path).collect())


def history(spark: SparkSession, root: Path) -> list[dict[str, Any]]:
    return [row.asDict() for row in read_table(spark, root / "tables/history").collect()]


def delta_dicts(path: Path) -> list[dict[str, Any]]:
    """A Delta table's rows read from its log without Spark (cheap to ask often)."""
    if not is_delta(path):
        return []
    rows: list[dict[str, Any]] = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    return rows


def catch_up(spark: SparkSession, folder: Path, *sets: str) -> None:
    app, spec = load_pipeline(folder / "streamsmith.yml", sets=sets)
    run_pipeline(spark, build_plan(app, spec, Trigger("available-now")))


@pytest.mark.deep  # make test-deep: make test covers the hops by catch-ups through the CLI
def test_always_on_and_catch_ups_carry_raw_orders_to_the_same_gold_tables(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Catch-ups: one run per delivery, each carrying it through every hop.
    caught_up = tmp_path / "catch_up"
    write_project(caught_up)
    deliver(caught_up, 0)
    catch_up(spark, caught_up)
    root = caught_up / "data"
    assert rows(spark, root / "tables/totals") == [("ann", 1, 10.0), ("bob", 1, 5.0),
                                                   ("cid", 1, 2.0)]  # fmt: skip
    deliver(caught_up, 1)
    catch_up(spark, caught_up)
    assert rows(spark, root / "tables/cleaned") == CLEANED
    assert rows(spark, root / "tables/totals") == TOTALS
    changes = sorted(
        (r["customer"], r["orders"], r["amount"], r["change"]) for r in history(spark, root)
    )
    assert changes == [
        ("ann", 1, 10.0, "insert"), ("ann", 2, 11.5, "update_postimage"),
        ("bob", 1, 5.0, "insert"), ("cid", 1, 2.0, "insert"), ("dee", 1, 3.0, "insert"),
    ]  # fmt: skip

    # Always on: the flows follow each other's tables as they grow.
    always = tmp_path / "always_on"
    spec_file = write_project(always)
    deliver(always, 0)
    app, spec = load_pipeline(spec_file)
    stop = threading.Event()
    outcome: list[object] = []
    plan = build_plan(app, spec, Trigger("interval", 0.0))
    runner = threading.Thread(target=lambda: outcome.append(run_pipeline(spark, plan, stop)))
    runner.start()
    tables = always / "data/tables"
    try:
        deliver(always, 1)  # while the run goes: in its first batch or a later one
        wait_for(
            lambda: latest_per_customer(delta_dicts(tables / "history")) == TOTALS,
            "the totals of both deliveries, to their history",
            600,
            2,
        )
    finally:
        stop.set()
        runner.join(300)
    assert outcome, "the always-on run failed"
    assert rows(spark, tables / "cleaned") == CLEANED
    assert rows(spark, tables / "totals") == TOTALS
    assert latest_per_customer(history(spark, root)) == TOTALS


def test_a_full_refresh_of_the_middle_table_rebuilds_the_tables_downstream(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_project(tmp_path)
    deliver(tmp_path, 0)
    deliver(tmp_path, 1)
    catch_up(spark, tmp_path)
    root = tmp_path / "data"
    assert rows(spark, root / "tables/totals") == TOTALS
    raw_checkpoint = root / "checkpoints/shop/cleaned/commits"

    # A new cleaning rule: cleaned is rebuilt from all raw orders, and so are the totals
    # (a merge into the old totals would have kept cid) and their history.
    app, spec = load_pipeline(tmp_path / "streamsmith.yml", sets=[BIG_ORDERS])
    plan = build_plan(app, spec, Trigger("available-now"))
    removed = full_refresh(plan, ["cleaned"])
    assert str(root / "tables/totals") in removed and not raw_checkpoint.exists()
    run_pipeline(spark, plan)

    assert rows(spark, root / "tables/totals") == BIG_TOTALS
    assert sorted((r["customer"], r["change"]) for r in history(spark, root)) == [
        ("ann", "insert"), ("bob", "insert"), ("dee", "insert"),
    ]  # fmt: skip

    # A backfill runs the same code hop by hop over the backfill tables.
    report = backfill(spark, plan)
    assert report.rows["cleaned"] == 3 and report.rows["totals"] == 3
    assert rows(spark, root / "backfill/totals") == BIG_TOTALS


def test_dry_run_draws_the_graph_and_rejects_a_cycle(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_project(monkeypatch, tmp_path)
    write_project(tmp_path)
    shown = invoke("dry-run")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.rstrip().endswith(
        "dependency graph (sources -> flows -> what they write; flows start in this order):\n"
        "  source raw_orders -> cleaned\n"
        "  cleaned -> table cleaned, quarantine cleaned_quarantine\n"
        "  cleaned -> totals (table cleaned, appended rows)\n"
        "  totals -> table totals\n"
        "  totals -> history (table totals, its change data feed)\n"
        "  history -> table history\n"
        # tables no run has created yet stand in empty, in a scratch folder: none is made
        "analysed by Spark against their sources: flow cleaned, flow totals, flow history"
    )
    assert not (tmp_path / "data/tables").exists()

    cyclic = copy.deepcopy(SPEC)
    cyclic["sources"]["history_feed"] = {"format": "delta", "table": "history"}
    cyclic["flows"]["cleaned"]["source"] = "history_feed"
    cyclic["flows"]["cleaned"]["sql"] = "SELECT * FROM history_feed"
    write_project(tmp_path, cyclic)
    refused = invoke("dry-run")
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "error: flows cleaned -> totals -> history -> cleaned read each other's tables in a "
        "cycle: a flow can read only the tables of flows that do not read its own; break the "
        "cycle"
    )
