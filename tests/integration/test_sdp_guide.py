"""Every example of SDP's programming guide (``tests/sdp_guide.py``) runs on streamsmith
and gives the tables SDP's own runner gives: each project run by ``spark-pipelines run``
(``make peers-sdp`` installs it, with Delta's jars) and by ``streamsmith run``, every
dataset's columns and rows compared."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from test_sdp_reference import DELTA, SDP

from sdp_guide import DATASETS, write_project


def run(folder: Path, command: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("STREAMSMITH_ROOT", "PYTHONPATH")}
    if command[0] == str(SDP):
        env.update(PYSPARK_PYTHON=str(SDP.parent / "python"), PATH=f"{SDP.parent}:{env['PATH']}")
    else:
        env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
    return subprocess.run(
        command, cwd=folder, env=env, capture_output=True, text=True, timeout=1800, check=False
    )


def delta_tables(folder: Path, names: tuple[str, ...]) -> dict[str, Any]:
    """Each dataset's columns and rows (sorted, as text so that nulls sort) under
    ``folder``."""
    found = {}
    for name in names:
        table = DeltaTable(str(folder / name)).to_pyarrow_table()
        rows = sorted(tuple(map(repr, r.values())) for r in table.to_pylist())
        found[name] = (table.column_names, rows)
    return found


@pytest.mark.deep
@pytest.mark.timeout(3600)
@pytest.mark.skipif(not SDP.exists(), reason="make peers-sdp installs spark-pipelines")
@pytest.mark.parametrize("project", ["python", "sql"])
def test_the_guide_s_examples_give_spark_pipelines_tables(tmp_path: Path, project: str) -> None:
    ours, theirs = tmp_path / "streamsmith", tmp_path / "sdp"
    for folder in (ours, theirs):
        write_project(folder, project)
    ran = run(ours, [sys.executable, "-m", "streamsmith", "run"])
    assert ran.returncode == 0, ran.stderr[-3000:]
    if project == "sql":  # the guide's `INSERT INTO t SELECT`: SDP 4.2 wants `BY NAME`
        refused = run(theirs, [str(SDP), *DELTA, "run"])
        said = refused.stdout + refused.stderr
        assert "Only INSERT INTO by name flows supported" in said, said[-3000:]
        flows = theirs / "transformations/customers_us.sql"
        text = flows.read_text("utf-8")
        assert text.count("INSERT INTO customers_us\n") == 2
        flows.write_text(text.replace("INTO customers_us\n", "INTO customers_us BY NAME\n"))
    reference = run(theirs, [str(SDP), *DELTA, "run"])
    assert "Run is COMPLETED" in reference.stdout + reference.stderr, reference.stdout[-3000:]
    names = DATASETS[project]
    mine = delta_tables(ours / "pipeline-storage/tables", names)
    assert mine == delta_tables(theirs / "spark-warehouse", names)
    assert all(rows for _, rows in mine.values()), mine
    shutil.rmtree(theirs / "spark-warehouse")


@pytest.mark.deep
@pytest.mark.timeout(3600)
@pytest.mark.skipif(not SDP.exists(), reason="make peers-sdp installs spark-pipelines")
def test_the_guide_s_for_loop_runs_here_and_sdp_refuses_it(tmp_path: Path) -> None:
    """The guide's ``for`` loop makes ``@dp.table``s of batch queries: SDP 4.2 refuses a
    batch flow into a streaming table; streamsmith writes them (a difference)."""
    ours, theirs = tmp_path / "streamsmith", tmp_path / "sdp"
    for folder in (ours, theirs):
        write_project(folder, "loop")
    reference = run(theirs, [str(SDP), *DELTA, "run"])
    assert "populating the streaming table with an append once-flow" in reference.stdout
    ran = run(ours, [sys.executable, "-m", "streamsmith", "run"])
    assert ran.returncode == 0, ran.stderr[-3000:]
    tables = delta_tables(ours / "pipeline-storage/tables", DATASETS["loop"])
    columns = [
        "custkey", "name", "phone", "nation", "region", "orderkey", "orderstatus",
        "totalprice", "orderdate",
    ]  # fmt: skip
    rows = {
        "africa_customer_orders": [
            (1, "Customer#1", "10-1", "ALGERIA", "AFRICA", 1, "O", 10.5, "1996-01-02"),
        ],
        "america_customer_orders": [],
        "europe_customer_orders": [
            (2, "Customer#2", "12-2", "FRANCE", "EUROPE", 2, "F", 20.0, "1996-12-01"),
            (2, "Customer#2", "12-2", "FRANCE", "EUROPE", 4, "P", 7.75, "1997-05-06"),
            (3, "Customer#3", "13-3", "GERMANY", "EUROPE", 3, "O", 5.25, "1997-03-04"),
        ],
    }  # fmt: skip
    assert tables == {
        name: (columns, sorted(tuple(map(repr, row)) for row in table))
        for name, table in rows.items()
    }
