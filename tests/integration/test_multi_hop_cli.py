"""A bronze -> silver -> gold pipeline as a user runs it: ``dry-run`` draws the flows'
dependency graph and rejects a cycle in one line; ``run`` carries raw files to the gold
table in one catch-up; ``run --full-refresh-table`` of the middle table rebuilds it and
the tables downstream of it."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from hops import BIG_ORDERS, BIG_TOTALS, SPEC, TOTALS, deliver, write_project


def streamsmith(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "STREAMSMITH_ROOT"}
    return subprocess.run(
        [sys.executable, "-m", "streamsmith", *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip


def delta_rows(path: Path) -> list[tuple[Any, ...]]:
    """A Delta table's rows, read from its log without a JVM."""
    table = DeltaTable(str(path)).to_pyarrow_table()
    return sorted(tuple(row.values()) for row in table.to_pylist())


def test_dry_run_draws_the_graph_and_rejects_a_cycle(tmp_path: Path) -> None:
    write_project(tmp_path)
    shown = streamsmith(tmp_path, "dry-run")
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
    refused = streamsmith(tmp_path, "dry-run")
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "error: flows cleaned -> totals -> history -> cleaned read each other's tables in a "
        "cycle: a flow can read only the tables of flows that do not read its own; break the "
        "cycle"
    )


@pytest.mark.deep
def test_one_catch_up_carries_raw_files_to_gold_and_a_middle_refresh_rebuilds_downstream(
    tmp_path: Path,
) -> None:
    write_project(tmp_path)
    deliver(tmp_path, 0)
    deliver(tmp_path, 1)
    tables = tmp_path / "data/tables"

    ran = streamsmith(tmp_path, "run", "--trigger", "available-now")
    assert ran.returncode == 0, ran.stderr
    assert "shop.totals: 1 batches, 5 records read, 4 rows written" in ran.stdout
    assert delta_rows(tables / "totals") == TOTALS

    refreshed = streamsmith(
        tmp_path, "run", "--trigger", "available-now", "--full-refresh-table", "cleaned",
        "--set", BIG_ORDERS,
    )  # fmt: skip
    assert refreshed.returncode == 0, refreshed.stderr
    assert f"full refresh: removed {tables / 'totals'}" in refreshed.stderr
    assert f"full refresh: removed {tables / 'history'}" in refreshed.stderr
    assert delta_rows(tables / "totals") == BIG_TOTALS
    changes = sorted((row[0], row[3]) for row in delta_rows(tables / "history"))
    assert changes == [("ann", "insert"), ("bob", "insert"), ("dee", "insert")]
