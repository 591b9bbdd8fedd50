"""A pipeline written in Python on the public API (``streamsmith.Pipeline``), run through
the command line three ways: as a package's entry point, by its file, and as a
backfill; the outputs agree, and expectations and quarantine hold."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from streamsmith.cli import cli
from streamsmith.io.lake import backfill_path, read_table, table_path
from streamsmith.web.server import Dashboard

PIPELINE = '''
"""Orders: a pipeline of a package of its own."""

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import streamsmith as ss

pipeline = ss.Pipeline(
    "orders",
    description="orders checked and totalled per minute",
    sources={
        "orders": {
            "format": "jsonl",
            "path": "input/orders",
            "schema": "order_id string, amount double, ts timestamp",
        }
    },
    trigger="available-now",
)


@pipeline.flow(
    source="orders",
    sink={"table": "checked_orders"},
    required=("order_id",),
    expect={"positive": ss.Expect("amount > 0", "drop"), "small": "amount < 1000"},
)
def checked_orders(orders: DataFrame) -> DataFrame:
    """Orders with a positive amount."""
    return orders.withColumn("cents", (F.col("amount") * 100).cast("long"))


@pipeline.flow(
    source="orders",
    sink={"table": "minute_totals", "output_mode": "append"},
    event_time=ss.EventTime("ts", lateness="1 minute", window="1 minute"),
)
def minute_totals(orders: DataFrame) -> DataFrame:
    """Amount per minute, appended once the minute is closed."""
    return orders.groupBy("window").agg(F.sum("amount").alias("total")).select(
        F.col("window.start").alias("minute"), "total"
    )
'''
LINES = [
    {"order_id": "o1", "amount": 10.0, "ts": "2026-11-25T10:00:10Z"},
    {"order_id": "o2", "amount": -5.0, "ts": "2026-11-25T10:00:20Z"},
    {"order_id": "o3", "amount": 2500.0, "ts": "2026-11-25T10:01:30Z"},
    {"order_id": None, "amount": 1.0, "ts": "2026-11-25T10:01:40Z"},
    {"order_id": "o5", "amount": 4.0, "ts": "2026-11-25T10:05:00Z"},
]


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The pipeline as an installed package: its module and a dist-info naming it under
    the entry-point group ``streamsmith.pipelines``."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "orders_pipeline.py").write_text(PIPELINE)
    info = site / "orders_pipeline-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: orders-pipeline\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[streamsmith.pipelines]\norders = orders_pipeline:pipeline\n"
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("STREAMSMITH_ROOT", raising=False)
    return site


def with_input(root: Path) -> Path:
    folder = root / "input/orders"
    folder.mkdir(parents=True)
    lines = [json.dumps(line) for line in LINES] + ['{"order_id": "o6", "amount": ']
    (folder / "part-0.jsonl").write_text("\n".join(lines) + "\n")
    return root


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def rows(spark: SparkSession, path: Path) -> list[tuple[Any, ...]]:
    return sorted(tuple(str(v) for v in row) for row in read_table(spark, path).collect())


def test_a_python_pipeline_runs_by_entry_point_by_file_and_as_a_backfill(
    spark: SparkSession, tmp_path: Path, package: Path
) -> None:
    assert "orders: orders checked and totalled per minute (installed pipeline)" in invoke("apps")
    plan = invoke("dry-run", "orders", "--root", str(tmp_path / "x"))
    assert "flow checked_orders: Orders with a positive amount." in plan
    assert "expect positive: amount > 0 (on failure: drop)" in plan
    assert "event time: ts watermark 1 minute, windows 1 minute" in plan

    by_name = with_input(tmp_path / "by_name")
    invoke("run", "orders", "--root", str(by_name))
    checked = rows(spark, table_path(by_name, "checked_orders"))
    assert checked == [
        ("o1", "10.0", "2026-11-25 10:00:10", "1000"),
        ("o3", "2500.0", "2026-11-25 10:01:30", "250000"),
        ("o5", "4.0", "2026-11-25 10:05:00", "400"),
    ]
    quarantine = read_table(spark, table_path(by_name, "checked_orders_quarantine")).collect()
    assert sorted(row.reason.split(":")[0] for row in quarantine) == [
        "malformed JSON line",
        "missing or invalid field order_id",
    ]
    # Closed minutes only (append mode); the watermark stops at 10:04 in a catch-up run.
    assert rows(spark, table_path(by_name, "minute_totals")) == [
        ("2026-11-25 10:00:00", "5.0"),
        ("2026-11-25 10:01:00", "2501.0"),
    ]

    # The read and operate verbs work on it by name like on any app.
    root = ["--root", str(by_name)]
    counted = invoke("query", "--app", "orders", *root, "--format", "json",
                     "SELECT count(*) AS n FROM checked_orders")  # fmt: skip
    assert json.loads(counted) == {"n": 3}
    statuses = [json.loads(line) for line in invoke("status", "orders", *root,
                                                    "--format", "json").splitlines()]  # fmt: skip
    checked_status = next(row for row in statuses if row["query"] == "orders.checked_orders")
    assert checked_status["expectations"] == {
        "positive": {"passed": 3, "failed": 1},
        "small": {"passed": 3, "failed": 1},
    }
    page = Dashboard(by_name).data()
    assert "orders.minute_totals" in json.dumps(page, default=str)
    shown = invoke("checkpoint", "show", "orders", *root)
    assert "orders.checked_orders" in shown and "orders.minute_totals" in shown
    assert "resumes" in invoke("check-upgrade", "orders", *root)

    by_file = with_input(tmp_path / "by_file")
    invoke("run", str(package / "orders_pipeline.py"), "--root", str(by_file))
    assert rows(spark, table_path(by_file, "checked_orders")) == checked

    invoke("backfill", "orders", "--root", str(by_name))
    assert rows(spark, backfill_path(by_name, "checked_orders")) == checked


LIBRARY_SPEC = """
name: clicks_lib
storage_root: data
trigger: available-now
sources:
  clicks:
    format: jsonl
    path: input/clicks
    schema: "user string, ts timestamp, ms int"
    required: [user]
libraries:
  - glob: {include: transformations/**}
flows:
  per_minute:
    event_time: {lateness: 10 minutes}
"""
LIBRARY_PY = '''
from pyspark.sql import DataFrame

import streamsmith as ss


@ss.flow(event_time=ss.EventTime("ts", "1 minute", window="1 minute"))
def per_minute(clicks: DataFrame) -> DataFrame:
    """Clicks per minute."""
    return clicks.groupBy("window").count().selectExpr("window.start AS minute", "count")
'''
LIBRARY_SQL = """-- as Spark Declarative Pipelines writes it
CREATE OR REFRESH STREAMING TABLE slow_clicks AS
SELECT user, ms FROM STREAM(clicks) WHERE ms > 500;
"""


def test_a_spec_with_libraries_runs_its_python_and_sql_files(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "transformations").mkdir()
    (tmp_path / "transformations/clicks_per_minute.py").write_text(LIBRARY_PY)
    (tmp_path / "transformations/slow_clicks.sql").write_text(LIBRARY_SQL)
    (tmp_path / "streamsmith.yml").write_text(LIBRARY_SPEC)
    clicks = [("u1", "10:00:05", 100), ("u2", "10:00:40", 900), ("u1", "10:01:10", 700),
              ("u4", "10:12:00", 10), ("u3", "10:20:00", 50), (None, "10:20:01", 999)]  # fmt: skip
    folder = tmp_path / "data/input/clicks"
    folder.mkdir(parents=True)
    lines = [json.dumps({"user": u, "ts": f"2026-11-25T{t}Z", "ms": ms}) for u, t, ms in clicks]
    (folder / "part-0.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("STREAMSMITH_ROOT", raising=False)
    try:
        invoke("run")
    finally:
        sys.modules.pop("clicks_per_minute", None)
    root = tmp_path / "data"
    assert rows(spark, table_path(root, "slow_clicks")) == [("u1", "700"), ("u2", "900")]
    # The spec's lateness (10 minutes, not the code's 1) keeps 10:12 open at 10:20.
    assert rows(spark, table_path(root, "per_minute")) == [
        ("2026-11-25 10:00:00", "2"),
        ("2026-11-25 10:01:00", "1"),
    ]
    rejected = read_table(spark, table_path(root, "slow_clicks_quarantine")).collect()
    assert [row.reason for row in rejected] == ["missing or invalid field user"]
