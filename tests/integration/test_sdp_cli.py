"""An SDP project as its user runs it, in its own folder, unchanged, each command a
process of its own: ``init --sdp`` and the project's own tests, and the four-chunk
acceptance with a kill (deep). ``dry-run`` and two catch-ups of the shop project, and a
run of AUTO CDC flows, sinks and once flows, run in-process
(tests/streaming/test_sdp_commands.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from crashing import batch_ids, kill_mid_batch, spawn
from deltalake import DeltaTable
from pyspark.sql import SparkSession

import sdp_acceptance
from inprocess import in_project, invoke


def streamsmith(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "STREAMSMITH_ROOT"}
    return subprocess.run(
        [sys.executable, "-m", "streamsmith", *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip


def test_init_sdp_makes_the_project_spark_pipelines_makes_and_it_runs(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``init --sdp`` and ``run`` in processes of their own, ``dry-run`` in this one."""
    folder = tmp_path / "starter"
    made = streamsmith(tmp_path, "init", "--sdp", "starter")
    assert made.returncode == 0, made.stderr
    spec = (folder / "spark-pipeline.yml").read_text()
    assert "name: starter\n" in spec
    assert f"storage: file://{folder.resolve()}/pipeline-storage\n" in spec
    assert "include: transformations/**" in spec
    assert streamsmith(folder, "init", "--sdp", ".").returncode == 2  # not empty

    in_project(monkeypatch, folder)
    shown = invoke("dry-run")
    assert shown.returncode == 0, shown.stderr
    assert (
        "  example_python_materialized_view -> example_sql_materialized_view "
        "(materialized view, reads view example_python_materialized_view)"
    ) in shown.stdout
    ran = streamsmith(folder, "run", "--trigger", "available-now")
    assert ran.returncode == 0, ran.stderr
    found = {
        name: sorted(row["id"] for row in DeltaTable(
            str(folder / "pipeline-storage/tables" / name)).to_pyarrow_table().to_pylist())
        for name in ("example_python_materialized_view", "example_sql_materialized_view")
    }  # fmt: skip
    assert found == {
        "example_python_materialized_view": list(range(10)),
        "example_sql_materialized_view": [0, 2, 4, 6, 8],
    }

    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider"],
        cwd=folder, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "2 passed" in tested.stdout


@pytest.mark.deep  # six CLI runs and a kill: `make test` keeps the two catch-ups above
@pytest.mark.timeout(3600)  # six cold Spark applications: 3-4 min each on a loaded machine
def test_four_chunks_then_a_sigkill_mid_run_in_an_unchanged_sdp_project(tmp_path: Path) -> None:
    """Issue 51's acceptance: Python and SQL files, streaming tables, a materialized view
    with a join, a temporary view, an append-flow target fed by two flows and AUTO CDC
    SCD 1 and 2; one catch-up run per chunk gives every dataset the rows worked out in
    plain Python; then a run killed mid-batch and restarted on the same storage loses
    and duplicates nothing."""
    sdp_acceptance.write_project(tmp_path)
    for chunk in range(4):
        sdp_acceptance.deliver(tmp_path, chunk)
        ran = streamsmith(tmp_path, "run", "--trigger", "available-now")
        assert ran.returncode == 0, ran.stderr
        assert sdp_acceptance.tables(tmp_path) == sdp_acceptance.expected(chunk + 1), chunk

    sdp_acceptance.deliver(tmp_path, 4)
    checkpoint = tmp_path / "pipeline-storage/checkpoints/shop/orders_raw"
    command = [sys.executable, "-m", "streamsmith", "run", "--trigger", "available-now"]
    killed = spawn([*command, str(tmp_path)])
    kill_mid_batch(killed, checkpoint)
    restarted = streamsmith(tmp_path, "run", "--trigger", "available-now")
    assert restarted.returncode == 0, restarted.stderr
    assert sdp_acceptance.tables(tmp_path) == sdp_acceptance.expected(5)
    assert len(batch_ids(checkpoint / "commits")) == 5
