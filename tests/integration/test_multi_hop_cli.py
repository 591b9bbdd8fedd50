"""A bronze -> silver -> gold pipeline as a user runs it, a process per command (deep):
``run`` carries raw files to the gold table in one catch-up; ``run --full-refresh-table``
of the middle table rebuilds it and the tables downstream of it. ``dry-run`` is tested
in-process (tests/streaming/test_multi_hop.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from hops import BIG_ORDERS, BIG_TOTALS, TOTALS, deliver, write_project


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
