"""The pipeline of the tutorial "Change data capture" always on: change events into an
SCD2 table, and a gold table of current customers per tier that follows the history's
change data feed, reach the tables the tutorial's catch-ups and backfill show
(tests/integration/test_cdc_tutorial.py runs those through the CLI)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

import cdc_tutorial as tutorial
from streamsmith.config import Trigger
from streamsmith.io.lake_paths import is_delta
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import run_pipeline
from waiting import wait_for


def project(folder: Path) -> Path:
    """The tutorial's spec, its change events read from files instead of the topic."""
    spec = yaml.safe_load(tutorial.files()["streamsmith.yml"])
    del spec["kafka"]
    schema = spec["sources"]["changes"]["schema"]
    spec["sources"]["changes"] = {"format": "jsonl", "path": "input/changes", "schema": schema}
    spec["spark"] = {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": 2}}
    (folder / "data/input/changes").mkdir(parents=True)
    path = folder / "streamsmith.yml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.deep  # three queries always on: half a minute or more
def test_always_on_gives_the_tables_of_the_catch_ups(spark: SparkSession, tmp_path: Path) -> None:
    app, spec = load_pipeline(project(tmp_path))
    inbox, tables = tmp_path / "data/input/changes", tmp_path / "data/tables"
    stop = threading.Event()
    outcome: list[object] = []
    plan = build_plan(app, spec, Trigger("interval", 0.0))
    runner = threading.Thread(target=lambda: outcome.append(run_pipeline(spark, plan, stop)))
    runner.start()

    def holds(step: int) -> bool:  # the tables after the first change file, or both
        history, gold = tables / "customer_history", tables / "customers_per_tier"
        return (
            is_delta(history)
            and is_delta(gold)
            and tutorial.rows(history, tutorial.HISTORY)
            == tutorial.ordered([tutorial.FIRST, tutorial.SECOND][step])
            and tutorial.rows(gold, tutorial.TIER) == tutorial.TIERS[step]
        )

    try:
        for step, name in enumerate(["changes.jsonl", "more.jsonl"]):
            (inbox / name).write_text(tutorial.files()[name])
            wait_for(lambda: holds(step), f"{name}, through to the gold table", 600, 1)  # noqa: B023
    finally:
        stop.set()
        runner.join(300)
    assert outcome, "the always-on run failed"
    assert tutorial.rows(tables / "customers", tutorial.CURRENT) == tutorial.CUSTOMERS[1]
    assert tutorial.rows(tables / "customers_per_tier", tutorial.TIER) == tutorial.TIERS[1]
