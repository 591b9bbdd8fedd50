"""Change data capture into Delta tables, run as streamsmith runs a spec: a change feed cut
at random points into micro-batches and catch-up runs, run always-on, and backfilled,
gives the type 1 and type 2 tables a plain-Python walk over the whole feed gives."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession

from change_feeds import SPEC, change_feed, scd1, scd2, split_into_files
from streamsmith.config import Trigger
from streamsmith.errors import UserError
from streamsmith.io import cdc
from streamsmith.io.lake import read_table, table_path
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.describe import describe_plan
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import backfill, run_pipeline
from waiting import wait_for


def project(folder: Path) -> Path:
    (folder / "data/input/changes").mkdir(parents=True)
    spec = folder / "streamsmith.yml"
    spec.write_text(yaml.safe_dump(SPEC))
    return spec


def rows(spark: SparkSession, path: Path) -> set[tuple[Any, ...]]:
    return {tuple(row) for row in read_table(spark, path).collect()}


def assert_tables(spark: SparkSession, root: Path, feed: list[dict[str, Any]]) -> None:
    assert rows(spark, table_path(root, "customers")) == scd1(feed)
    assert rows(spark, table_path(root, "customer_history")) == scd2(feed)


@pytest.mark.deep
def test_catch_ups_over_random_cuts_give_the_tables_of_the_whole_feed(
    spark: SparkSession, tmp_path: Path
) -> None:
    feed = change_feed(seed=11, events=60)
    rng = random.Random(11)
    spec_file = project(tmp_path)
    inbox = tmp_path / "data/input/changes"
    deliveries = [rng.randrange(10, len(feed) - 10)]  # two catch-up runs
    number = 0
    for start, end in zip([0, *deliveries], [*deliveries, len(feed)], strict=True):
        part = feed[start:end]
        cuts = [rng.randrange(1, len(part))]  # each run: two micro-batches
        number = split_into_files(part, inbox, cuts, first=number)
        app, spec = load_pipeline(spec_file)
        run_pipeline(spark, build_plan(app, spec, Trigger("available-now")))
        assert_tables(spark, tmp_path / "data", feed[:end])  # a prefix's tables, every run

    # The batch backfill over all the input: the same tables, rebuilt at once.
    app, spec = load_pipeline(spec_file)
    plan = build_plan(app, spec, Trigger("available-now"))
    assert "changes applied on id (scd type 2)" in describe_plan(plan)
    report = backfill(spark, plan)
    assert report.rows["customers"] == len(scd1(feed))
    backfilled = tmp_path / "data/backfill"
    assert rows(spark, backfilled / "customers") == scd1(feed)
    assert rows(spark, backfilled / "customer_history") == scd2(feed)
    # The type 1 table keeps its deleted keys' tombstones beside it, out of readers' sight.
    side = table_path(tmp_path / "data", "customers") / cdc.TOMBSTONES
    gone = {e["id"] for e in feed} - {row[0] for row in scd1(feed)}
    assert gone and gone <= {row.id for row in spark.read.format("delta").load(str(side)).collect()}


@pytest.mark.deep  # make test-deep: make test compares catch-ups at random cuts and a backfill
def test_an_always_on_run_gives_the_same_tables(spark: SparkSession, tmp_path: Path) -> None:
    feed = change_feed(seed=12, events=40)
    spec_file = project(tmp_path)
    inbox = tmp_path / "data/input/changes"
    app, spec = load_pipeline(spec_file)
    plan = build_plan(app, spec, Trigger("interval", 0))
    stop = threading.Event()
    outcome: list[object] = []
    runner = threading.Thread(target=lambda: outcome.append(run_pipeline(spark, plan, stop)))
    runner.start()
    cut = random.Random(12).randrange(10, len(feed) - 10)
    history = table_path(tmp_path / "data", "customer_history")

    def holds(part: list[dict[str, Any]]) -> bool:  # the run creates the table as it starts
        return (history / "_delta_log").is_dir() and rows(spark, history) == scd2(part)

    try:
        split_into_files(feed[:cut], inbox, [])
        wait_for(lambda: holds(feed[:cut]), "the first part", 900, 5)
        split_into_files(feed[cut:], inbox, [], first=1)
        wait_for(lambda: holds(feed), "the whole feed", 900, 5)
    finally:
        stop.set()
        runner.join(120)
    assert outcome, "the run raised"
    assert_tables(spark, tmp_path / "data", feed)


def test_a_replayed_batch_changes_nothing_and_a_change_without_sequence_fails(
    spark: SparkSession, tmp_path: Path
) -> None:
    from delta.tables import DeltaTable

    feed = change_feed(seed=13, events=30)
    spec_file = project(tmp_path)
    app, spec = load_pipeline(spec_file)
    plan = build_plan(app, spec, Trigger("available-now"))
    (flow,) = [flow for flow in plan.flows if flow.name == "customer_history"]
    sink = flow.outputs[0].sink
    schema = SPEC["sources"]["changes"]["schema"]
    columns = [field.split()[0] for field in schema.split(", ")]
    events = spark.createDataFrame([tuple(e.get(c) for c in columns) for e in feed], schema)
    rules = sink.change_rules(events)  # type: ignore[attr-defined]
    path = tmp_path / "history"
    cdc.create_tables(spark, path, events, rules)
    for _ in range(2):  # the second call replays batch 0
        cdc.apply_changes(events, path, rules, "test-app", 0, "flow test")
    assert rows(spark, path) == scd2(feed)
    for table in (path, path / cdc.CHANGE_LOG):
        history = DeltaTable.forPath(spark, str(table)).history().collect()
        assert sorted(r.operation for r in history) == ["CREATE TABLE", "MERGE"]

    unordered = spark.createDataFrame([(1, "a", None, 1, "upsert", None, "x")], events.schema)
    with pytest.raises(UserError, match=r"flow test: a change event has no sequence .*'id': 1"):
        cdc.apply_changes(unordered, path, rules, "test-app", 1, "flow test")


def test_a_cdc_flow_needs_a_delta_sink_in_append_mode(tmp_path: Path) -> None:
    spec_file = project(tmp_path)
    for sets, message in [
        (("flows.customers.sink.format=parquet",), "set sink.format: delta"),
        (("flows.customers.sink.output_mode=update",), "use output_mode append"),
        (("flows.customers.sink.keys=[id]",), "merges on cdc.keys: remove sink.keys"),
    ]:
        app, spec = load_pipeline(spec_file, sets=sets)
        with pytest.raises(UserError, match=message):
            build_plan(app, spec, Trigger("available-now"))
