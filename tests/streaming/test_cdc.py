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


def sink_rules(spec_file: Path, flow_name: str, events: Any, sets: tuple[str, ...]) -> Any:
    """The rules of flow ``flow_name`` of the spec (with ``sets``) over ``events``."""
    app, spec = load_pipeline(spec_file, sets=sets)
    plan = build_plan(app, spec, Trigger("available-now"))
    (flow,) = [flow for flow in plan.flows if flow.name == flow_name]
    return flow.outputs[0].sink.change_rules(events)  # type: ignore[attr-defined]


def events_frame(spark: SparkSession, events: list[tuple[Any, ...]]) -> Any:
    """(id, name, tier, balance, op, seq) rows as the spec's change events."""
    return spark.createDataFrame([(*e, None) for e in events], SPEC["sources"]["changes"]["schema"])


def test_ignore_null_updates_keeps_the_keys_values_for_null_columns_late_events_included(
    spark: SparkSession, tmp_path: Path
) -> None:
    first = [
        (1, "Ann", "gold", 10, "upsert", 1),
        (1, None, "silver", None, "upsert", 3),  # name and balance kept from seq 1
        (2, "Bob", "gold", 5, "upsert", 1),
        (2, None, None, None, "delete", 2),
        (2, None, "bronze", 7, "upsert", 4),  # after the delete: nothing to keep
    ]
    late = [
        (1, None, None, 20, "upsert", 2),  # balance 20 from seq 2 on: seq 3 keeps it
        (2, "Bo", None, None, "upsert", 3),  # after the delete, before seq 4: its name stays
    ]
    spec_file = project(tmp_path)
    ignoring = ("ignore_null_updates=true",)
    tables = {}
    for flow_name in ("customers", "customer_history"):
        path = tmp_path / flow_name
        rules = sink_rules(
            spec_file, flow_name, events_frame(spark, first),
            tuple(f"flows.{flow_name}.cdc.{s}" for s in ignoring),
        )  # fmt: skip
        assert rules.ignore_null_updates
        cdc.create_tables(spark, path, events_frame(spark, first), rules)
        for batch_id, batch in enumerate((first, late)):
            cdc.apply_changes(events_frame(spark, batch), path, rules, "t", batch_id, "test")
            tables[flow_name, batch_id] = rows(spark, path)
    # (id, name, tier, balance, seq, __SEQUENCE)
    assert tables["customers", 0] == {(1, "Ann", "silver", 10, 3, 3), (2, None, "bronze", 7, 4, 4)}
    assert tables["customers", 1] == {(1, "Ann", "silver", 20, 3, 3), (2, "Bo", "bronze", 7, 4, 4)}
    # (id, name, tier, balance, seq, __START_AT, __END_AT); name and tier tracked
    assert tables["customer_history", 1] == {
        (1, "Ann", "gold", 20, 2, 1, 3),  # seq 2's balance updated the version in place
        (1, "Ann", "silver", 20, 3, 3, None),
        (2, "Bob", "gold", 5, 1, 1, 2),
        (2, "Bo", None, None, 3, 3, 4),
        (2, "Bo", "bronze", 7, 4, 4, None),
    }


def test_apply_as_truncates_empties_the_table_at_its_sequence_late_events_included(
    spark: SparkSession, tmp_path: Path
) -> None:
    """(The project of ``test_sdp_projects.py`` truncates a table that ignores null
    updates, whose rows are recomputed from its change log.)"""
    batches = [
        [
            (1, "Ann", "gold", 10, "upsert", 1),
            (2, "Bob", "gold", 5, "upsert", 2),
            (0, None, None, None, "truncate", 3),
            (3, "Cy", "gold", 1, "upsert", 4),
        ],
        [
            (1, "Ann", "silver", 11, "upsert", 2),  # late, before the truncation: gone
            (2, "Bob", "silver", 6, "upsert", 5),
        ],
        [
            (4, "Di", "gold", 2, "upsert", 7),
            (9, None, None, None, "truncate", 6),  # a later truncation, with a later change
        ],
    ]
    spec_file = project(tmp_path)
    sets = ("flows.customers.cdc.apply_as_truncates=op = 'truncate'",)
    rules = sink_rules(spec_file, "customers", events_frame(spark, batches[0]), sets)
    path = tmp_path / "customers"
    cdc.create_tables(spark, path, events_frame(spark, batches[0]), rules)
    found = []
    for batch_id, batch in enumerate(batches):
        cdc.apply_changes(events_frame(spark, batch), path, rules, "t", batch_id, "test")
        found.append(rows(spark, path))
    assert found == [
        {(3, "Cy", "gold", 1, 4, 4)},
        {(3, "Cy", "gold", 1, 4, 4), (2, "Bob", "silver", 6, 5, 5)},
        {(4, "Di", "gold", 2, 7, 7)},
    ]
    kept = spark.read.format("delta").load(str(path / cdc.TRUNCATES)).collect()
    assert [tuple(row) for row in kept] == [(6,)]
    unordered = events_frame(spark, [(0, None, None, None, "truncate", None)])
    with pytest.raises(UserError, match=r"^test: 1 truncating event\(s\) .* have no sequence"):
        cdc.apply_changes(unordered, path, rules, "t", 3, "test")
