"""An SDP project as its user runs it, in its own folder, unchanged: ``streamsmith
dry-run`` draws its graph, ``streamsmith run`` carries the first chunk through every
dataset and a second ``run`` only the chunk delivered since (the tables keep their
state, unlike SDP's in-memory catalog)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from crashing import batch_ids, kill_mid_batch, spawn
from deltalake import DeltaTable

import sdp_acceptance
import sdp_cdc
from sdp_shop import DATASETS, deliver, expected, write_project


def streamsmith(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "STREAMSMITH_ROOT"}
    return subprocess.run(
        [sys.executable, "-m", "streamsmith", *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip


def tables(folder: Path) -> dict[str, list[tuple[Any, ...]]]:
    found = {}
    for name in DATASETS:
        rows = DeltaTable(str(folder / "pipeline-storage/tables" / name)).to_pyarrow_table()
        found[name] = sorted(tuple(row.values()) for row in rows.to_pylist())
    return found


def test_dry_run_then_two_catch_ups_in_an_unchanged_sdp_project(tmp_path: Path) -> None:
    write_project(tmp_path)
    deliver(tmp_path, 0)
    shown = streamsmith(tmp_path / "transformations", "dry-run")  # found from a subfolder
    assert shown.returncode == 0, shown.stderr
    assert "source orders_raw_input: read by the flow's own code: json " in shown.stdout
    assert shown.stdout.rstrip().endswith(
        "dependency graph (sources -> flows -> what they write; flows start in this order,"
        " then the views refresh):\n"
        "  source orders_raw_input -> orders_raw\n"
        "  orders_raw -> table orders_raw\n"
        "  orders_raw -> orders_silver (table orders_raw, appended rows)\n"
        "  orders_silver -> table orders_silver\n"
        "  orders_silver -> big_orders (table orders_silver, appended rows)\n"
        "  big_orders -> table big_orders\n"
        "  orders_raw -> region_events_eu (table orders_raw, appended rows)\n"
        "  region_events_eu -> table region_events\n"
        "  orders_raw -> region_events_us (table orders_raw, appended rows)\n"
        "  region_events_us -> table region_events\n"
        "  example_python_materialized_view -> example_sql_materialized_view "
        "(materialized view, reads view example_python_materialized_view)\n"
        "  orders_silver -> revenue_by_customer (materialized view, reads table orders_silver)\n"
        "  customers -> revenue_by_customer (materialized view, reads view customers)"
    )
    assert not (tmp_path / "pipeline-storage/tables").exists()

    first = streamsmith(tmp_path, "run")
    assert first.returncode == 0, first.stderr
    assert tables(tmp_path) == expected(1)

    deliver(tmp_path, 1)
    second = streamsmith(tmp_path, "run")
    assert second.returncode == 0, second.stderr
    assert tables(tmp_path) == expected(2)
    assert "shop.orders_raw: 1 batches, 3 records read, 3 rows written" in second.stdout


ARCHIVE_PY = """\
from pyspark import pipelines as dp

dp.create_sink("archive", "delta", {"path": spark.conf.get("archive.path")})


@dp.append_flow(target="archive")
def archived():
    return spark.readStream.table("customer_changes").select("id", "op", "seq")


dp.create_streaming_table("seeds")


@dp.append_flow(target="seeds", once=True)
def seeded():
    return spark.range(2).withColumnRenamed("id", "seed")
"""


def test_run_applies_an_sdp_project_s_auto_cdc_flows_sinks_and_once_flows(
    tmp_path: Path,
) -> None:
    sdp_cdc.write_project(tmp_path)
    (tmp_path / "transformations/archive.py").write_text(ARCHIVE_PY, encoding="utf-8")
    spec = tmp_path / "spark-pipeline.yml"
    archive = tmp_path / "archive"
    text = spec.read_text("utf-8").replace(
        "configuration:\n", f"configuration:\n  archive.path: {archive}\n"
    )
    spec.write_text(text, "utf-8")
    sdp_cdc.deliver(tmp_path, 0)
    sdp_cdc.deliver(tmp_path, 1)
    done = streamsmith(tmp_path, "run")
    assert done.returncode == 0, done.stderr
    assert sdp_cdc.tables(tmp_path) == sdp_cdc.expected(2)
    archived = DeltaTable(str(archive)).to_pyarrow_table().to_pylist()
    events = [(e["id"], e["op"], e["seq"]) for chunk in sdp_cdc.CHANGES for e in chunk]
    assert sorted((r["id"], r["op"], r["seq"]) for r in archived) == sorted(events)
    seeds = DeltaTable(str(tmp_path / "storage/tables/seeds")).to_pyarrow_table().to_pylist()
    assert sorted(r["seed"] for r in seeds) == [0, 1]


def test_init_sdp_makes_the_project_spark_pipelines_makes_and_it_runs(tmp_path: Path) -> None:
    folder = tmp_path / "starter"
    made = streamsmith(tmp_path, "init", "--sdp", "starter")
    assert made.returncode == 0, made.stderr
    spec = (folder / "spark-pipeline.yml").read_text()
    assert "name: starter\n" in spec
    assert f"storage: file://{folder.resolve()}/pipeline-storage\n" in spec
    assert "include: transformations/**" in spec
    assert streamsmith(folder, "init", "--sdp", ".").returncode == 2  # not empty

    shown = streamsmith(folder, "dry-run")
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
