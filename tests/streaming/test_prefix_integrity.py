"""Prefix integrity of the reference apps: streaming output == batch output, any split.

``streamsmith.testing.check_prefix_integrity`` cuts the input at random places, feeds the
chunks as micro-batches and compares each flow's final output with the batch job over
the same input. ``make test-deep`` raises the number of splits (STREAMSMITH_SPLITS).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from streamsmith.apps import get_app
from streamsmith.generate.actions import actions_data
from streamsmith.generate.activity import activity_data
from streamsmith.generate.cloudtrail import generate_cloudtrail
from streamsmith.generate.events import Knobs, Rule
from streamsmith.generate.logs import logs_data
from streamsmith.generate.nest import nest_data
from streamsmith.generate.secops import secops_data
from streamsmith.generate.signals import signals_data
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.lake import replace_static_table, table_path
from streamsmith.schemas.nest import DEVICE_LOCATIONS_SCHEMA
from streamsmith.testing import check_prefix_integrity
from streamsmith.transforms.multiset import multiset_difference

SPLITS = int(os.environ.get("STREAMSMITH_SPLITS", "1"))
ACTION_FLOWS = ("action_counts", "action_counts_sliding")


@pytest.fixture
def postgres_env(pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("STREAMSMITH_PG_DSN", pg_dsn)
    return pg_dsn


# Mild disorder and a few late events: random splits move the watermark differently, and
# the harness explains what each split dropped with the app's late table.
KNOBS = Knobs(out_of_order=0.1, late=0.05, too_late=0.02, corrupt=0.02)


@pytest.mark.deep
def test_signals_flows_equal_the_batch_result_for_every_split(
    spark: SparkSession, tmp_path: Path, postgres_env: str
) -> None:
    data = signals_data(devices=4, events=300, chunks=6, seed=5, knobs=KNOBS)

    report = check_prefix_integrity(
        spark, get_app("signals"), data.lines, root=tmp_path, splits=SPLITS, seed=1
    )

    report.assert_ok()
    assert report.splits == SPLITS
    assert all(r.compared_rows > 0 for r in report.results)


@pytest.mark.deep
def test_actions_counts_equal_the_batch_result_for_every_split(
    spark: SparkSession, tmp_path: Path, postgres_env: str
) -> None:
    # An hour of lateness instead of the app's day, so some events come too late.
    hour = Rule(delay=timedelta(hours=1), window=timedelta(hours=1))
    data = actions_data(phones=10, sessions=150, chunks=6, seed=6, knobs=KNOBS, rule=hour)
    assert data.label_counts["late"]
    sets = [f"flows.{flow}.event_time.lateness=1 hour" for flow in ACTION_FLOWS]

    report = check_prefix_integrity(
        spark, get_app("actions"), data.lines, root=tmp_path, splits=SPLITS, seed=2, sets=sets
    )

    report.assert_ok()
    assert all(r.compared_rows > 0 for r in report.results)


@pytest.mark.deep
def test_activity_dedup_equals_the_batch_result_for_every_split(
    spark: SparkSession, tmp_path: Path, postgres_env: str
) -> None:
    knobs = Knobs(out_of_order=0.1, late=0.0, too_late=0.0, duplicates=0.1, corrupt=0.02)
    data = activity_data(users=9, events=300, chunks=6, seed=7, knobs=knobs)

    # Sessions are not a prefix: a stream holds open sessions back until its watermark
    # passes them, a batch job closes them all at the end of its input.
    report = check_prefix_integrity(
        spark, get_app("activity"), data.lines, root=tmp_path, splits=SPLITS, seed=3,
        flows=("user_counts", "deduplicated"),
    )  # fmt: skip

    report.assert_ok()
    assert all(r.compared_rows > 0 for r in report.results)


def test_cloudtrail_records_equal_the_batch_result_for_every_split(
    spark: SparkSession, tmp_path: Path
) -> None:
    generate_cloudtrail(
        tmp_path / "generated", files=12, records_per_file=20, seed=4, corrupt_fraction=0.2
    )
    files = sorted(p for p in (tmp_path / "generated").rglob("*") if p.is_file())
    documents = [path.read_bytes() for path in files]

    report = check_prefix_integrity(
        spark, get_app("cloudtrail"), documents, root=tmp_path / "runs", splits=SPLITS, seed=2
    )

    report.assert_ok()
    assert all(r.compared_rows > 0 for r in report.results)


def test_nest_flows_from_kafka_equal_the_batch_result_for_every_split(
    spark: SparkSession, tmp_path: Path, broker: EmbeddedBroker
) -> None:
    data = nest_data(devices=8, events=120, seed=6, corrupt_fraction=0.05)

    def write_locations(root: Path) -> None:
        replace_static_table(
            table_path(root, "device_locations"), data.locations, DEVICE_LOCATIONS_SCHEMA
        )

    report = check_prefix_integrity(
        spark,
        get_app("nest"),
        list(data.messages),
        root=tmp_path,
        splits=SPLITS,
        seed=3,
        bootstrap=broker.bootstrap,
        prepare_root=write_locations,
    )

    report.assert_ok()
    assert all(r.compared_rows > 0 for r in report.results)


@pytest.mark.deep
def test_log_curation_equals_the_batch_result_for_every_split(
    spark: SparkSession, tmp_path: Path
) -> None:
    knobs = Knobs(out_of_order=0.1, late=0.05, too_late=0.02, duplicates=0.1, corrupt=0.03)
    data = logs_data(hosts=4, entries=300, chunks=6, seed=8, knobs=knobs)
    splits = max(1, SPLITS // 3)  # its dedup is covered by the activity splits too
    report = check_prefix_integrity(
        spark, get_app("logs"), data.lines, root=tmp_path, splits=splits, seed=4
    )
    report.assert_ok()
    assert all(r.compared_rows > 0 for r in report.results)


@pytest.mark.deep
def test_secops_structured_logs_equal_the_batch_result_for_every_split(
    spark: SparkSession, tmp_path: Path
) -> None:
    data = secops_data(devices=13, chunks=1, seed=5, corrupt_fraction=0.05)
    splits = max(1, SPLITS // 3)  # three sources, each with its own splits
    for source, flow in (("auth", "auth_logs"), ("dhcp", "dhcp_logs"), ("flows", "flow_logs")):
        report = check_prefix_integrity(
            spark, get_app("secops"), data.lines(source), root=tmp_path / source,
            splits=splits, seed=5, flows=(flow,),
        )  # fmt: skip
        report.assert_ok()
        assert all(r.compared_rows == data.events[source] for r in report.results)


def test_the_comparison_counts_each_row_and_leaves_out_what_late_events_touched(
    spark: SparkSession,
) -> None:
    """The harness's comparison: rows as multisets (a duplicate is a
    difference), keys touched by a dropped late event left out of both sides and
    counted, a null key never touched."""
    schema = "k string, n long"
    expected = spark.createDataFrame(
        [("a", 1), ("b", 2), ("b", 2), ("c", 3), ("t", 9), (None, 4)], schema
    )
    streamed = spark.createDataFrame(
        [("a", 1), ("b", 2), ("c", 3), ("c", 3), ("d", 5), ("t", 8), (None, 4)], schema
    )
    touched = spark.createDataFrame([("t",), (None,)], "k string")
    found = multiset_difference(expected, streamed, touched)
    assert (found.compared, found.excluded) == (5, 2)  # t on both sides left out
    assert found.missing == ("('b', 2)",)
    assert sorted(found.unexpected) == ["('c', 3)", "('d', 5)"]

    same = multiset_difference(expected, expected, None)
    assert (same.compared, same.excluded, same.missing, same.unexpected) == (6, 0, (), ())
