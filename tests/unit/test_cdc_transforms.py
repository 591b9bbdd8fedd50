"""The pure part of change data capture: a change feed folded into its type 1 and type 2
rows by Spark equals the plain-Python walk over the same feed, whatever the feed's order."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pydantic import ValidationError
from pyspark.sql import DataFrame, SparkSession

from change_feeds import CDC, SCHEMA, TRACKED, change_feed, scd1, scd2
from streamsmith import Pipeline
from streamsmith.config import CdcSpec, Trigger, load_spec
from streamsmith.runtime.plan import build_plan
from streamsmith.transforms.cdc import (
    ChangeRules,
    changes,
    history,
    latest_changes,
    one_per_sequence,
)

COLUMNS = [name for name, _ in (field.split() for field in SCHEMA.split(", "))]


def rules(scd_type: int) -> ChangeRules:
    tracked = TRACKED if scd_type == 2 else None
    return ChangeRules(
        ("id",), "seq", CDC["apply_as_deletes"], ("op", "note"), scd_type, tracked
    ).for_columns(COLUMNS)


@pytest.mark.parametrize("seed", [3, 4])
def test_spark_folds_a_shuffled_feed_as_the_plain_walk_does(spark: SparkSession, seed: int) -> None:
    feed = change_feed(seed)
    random.Random(seed).shuffle(feed)  # any arrival order gives the same tables
    events = spark.createDataFrame([tuple(e.get(c) for c in COLUMNS) for e in feed], SCHEMA)

    type1 = one_per_sequence(changes(events, rules(1)), rules(1))
    latest = latest_changes(type1, rules(1)).where("NOT __DELETED").drop("__DELETED")
    assert {tuple(row) for row in latest.collect()} == scd1(feed)

    type2 = one_per_sequence(changes(events, rules(2)), rules(2))
    assert {tuple(row) for row in history(type2, rules(2)).collect()} == scd2(feed)


def test_history_opens_versions_on_tracked_changes_and_updates_others_in_place(
    spark: SparkSession,
) -> None:
    rows = [
        (1, "ann", "gold", 1, "upsert", 10, None),
        (1, "ann", "gold", 2, "upsert", 20, None),  # balance only: in place
        (1, "ann", "silver", 2, "upsert", 30, None),  # tier: a new version
        (1, None, None, None, "delete", 40, None),  # closes it
        (1, None, None, None, "delete", 45, None),  # nothing left to close
        (1, "ann", "silver", 5, "upsert", 50, None),  # back, as a new version
    ]
    frame = one_per_sequence(changes(spark.createDataFrame(rows, SCHEMA), rules(2)), rules(2))
    versions = sorted(tuple(r) for r in history(frame, rules(2)).collect())
    assert versions == [
        (1, "ann", "gold", 2, 20, 10, 30),
        (1, "ann", "silver", 2, 30, 30, 40),
        (1, "ann", "silver", 5, 50, 50, None),
    ]


def test_the_rules_name_columns_the_events_lack_or_reserve() -> None:
    with pytest.raises(ValueError, match="column.s. nope that the flow's output lacks"):
        ChangeRules(("nope",), "seq", None, (), 1, None).for_columns(COLUMNS)
    with pytest.raises(ValueError, match="__START_AT, names cdc keeps"):
        ChangeRules(("id",), "seq", None, (), 1, None).for_columns([*COLUMNS, "__START_AT"])
    assert rules(2).tracked == TRACKED
    assert ChangeRules(("id",), "seq", None, ("op",), 2, None).for_columns(COLUMNS).tracked == (
        "name", "tier", "balance", "note"
    )  # fmt: skip


def test_the_cdc_block_is_checked_when_the_spec_loads() -> None:
    with pytest.raises(ValidationError, match="track_history_columns is for scd_type: 2"):
        CdcSpec(keys=("id",), sequence_by="seq", track_history_columns=("name",))
    with pytest.raises(ValidationError, match="leaves out key column"):
        CdcSpec(keys=("id",), sequence_by="seq", except_columns=("id",))
    with pytest.raises(ValidationError, match="keys"):
        CdcSpec(keys=(), sequence_by="seq")
    with pytest.raises(ValidationError, match="apply_as_truncates is for scd_type: 1"):
        CdcSpec(keys=("id",), sequence_by="seq", scd_type=2, apply_as_truncates="op = 't'")


def test_a_python_flow_declares_cdc_as_a_spec_flow_does(tmp_path: Path) -> None:
    pipeline = Pipeline("crm", sources={"changes": {"format": "jsonl", "path": "in"}})

    @pipeline.flow(
        sink={"format": "delta", "table": "customer_history"},
        schema=SCHEMA,
        cdc={**CDC, "scd_type": 2},
    )
    def customer_history(changes: DataFrame) -> DataFrame:
        return changes

    spec = load_spec(pipeline.default_spec, storage_root=str(tmp_path))
    declared = spec.flows["customer_history"].cdc
    assert declared is not None and (declared.keys, declared.scd_type) == (("id",), 2)
    plan = build_plan(pipeline.app, spec, Trigger("available-now"))
    assert "changes applied on id (scd type 2)" in plan.outputs[0].sink.describe()
