"""streamsmith's tables equal those of SDP's own runner on the same project: the project
run by ``spark-pipelines run`` (``make peers-sdp`` installs it, with Delta's jars) once
over both chunks, and by ``streamsmith run`` once per chunk."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from sdp_shop import DATASETS, deliver, expected, write_project

ROOT = Path(__file__).resolve().parents[2]
SDP = ROOT / ".venv-sdp/bin/spark-pipelines"
DELTA = (
    "--conf", "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension",
    "--conf", "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "--conf", "spark.sql.sources.default=delta",
)  # fmt: skip


def delta_tables(folder: Path) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
    """Every dataset's columns and rows (sorted) under ``folder``."""
    found = {}
    for name in DATASETS:
        table = DeltaTable(str(folder / name)).to_pyarrow_table()
        found[name] = (table.column_names, sorted(tuple(r.values()) for r in table.to_pylist()))
    return found


@pytest.mark.deep
@pytest.mark.timeout(3600)  # three Spark applications, one a Connect server
@pytest.mark.skipif(not SDP.exists(), reason="make peers-sdp installs spark-pipelines")
def test_streamsmith_tables_equal_spark_pipelines_tables(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "streamsmith", tmp_path / "sdp"
    env = {k: v for k, v in os.environ.items() if k not in ("STREAMSMITH_ROOT", "PYTHONPATH")}
    for folder in (ours, theirs):
        write_project(folder)
    for chunk in (0, 1):
        deliver(ours, chunk)
        deliver(theirs, chunk)
        ran = subprocess.run(
            [sys.executable, "-m", "streamsmith", "run"], cwd=ours, capture_output=True,
            text=True, timeout=900, check=False,
            env={**env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
    sdp_env = {**env, "PYSPARK_PYTHON": str(SDP.parent / "python")}
    sdp_env["PATH"] = f"{SDP.parent}:{env.get('PATH', '')}"
    reference = subprocess.run(
        [str(SDP), *DELTA, "run"], cwd=theirs, env=sdp_env, capture_output=True, text=True,
        timeout=1800, check=False,
    )  # fmt: skip
    assert "Run is COMPLETED" in reference.stdout + reference.stderr, reference.stderr[-2000:]
    mine = delta_tables(ours / "pipeline-storage/tables")
    assert mine == delta_tables(theirs / "spark-warehouse")
    assert {name: rows for name, (_, rows) in mine.items()} == expected(2)
    shutil.rmtree(theirs / "spark-warehouse")
