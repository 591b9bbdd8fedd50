"""Prefix integrity of the reference apps: streaming output == batch output, any split.

``streamsmith.testing.check_prefix_integrity`` cuts the input at random places, feeds the
chunks as micro-batches and compares each flow's final output with the batch job over
the same input. ``make test-deep`` raises the number of splits (STREAMSMITH_SPLITS).
"""

from __future__ import annotations

import json
import os
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import SparkSession

from streamsmith.apps import get_app
from streamsmith.generate.cloudtrail import generate_cloudtrail
from streamsmith.generate.nest import nest_data
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.lake import replace_static_table, table_path
from streamsmith.schemas.nest import DEVICE_LOCATIONS_SCHEMA
from streamsmith.testing import check_prefix_integrity

SPLITS = int(os.environ.get("STREAMSMITH_SPLITS", "10"))
START = datetime(2026, 11, 20, 10, tzinfo=UTC)


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def signal_lines(events: int, seed: int, disorder: timedelta) -> list[bytes]:
    """Signals from 4 devices every ~15 s, each delayed by up to ``disorder``."""
    rng = random.Random(seed)
    timed = []
    for index in range(events):
        happened = START + timedelta(seconds=15 * index + rng.randint(0, 14))
        arrives = happened + timedelta(seconds=rng.uniform(0, disorder.total_seconds()))
        record = {"eventTime": iso(happened), "deviceId": f"dev-{rng.randint(1, 4)}",
                  "signal": round(rng.uniform(0, 100), 3)}  # fmt: skip
        timed.append((arrives, json.dumps(record).encode()))
    timed.sort(key=lambda pair: pair[0])
    return [line for _, line in timed]


def test_signals_windows_equal_the_batch_result_for_every_split(
    spark: SparkSession, tmp_path: Path
) -> None:
    lines = signal_lines(400, seed=5, disorder=timedelta(minutes=4))
    lines.insert(200, b'{"eventTime": "2026-11-20T10:40:00Z", "deviceId": "dev-1", "signal": "x"}')

    report = check_prefix_integrity(
        spark,
        get_app("signals"),
        lines,
        root=tmp_path,
        flows=["signal_windows_final", "signal_windows_live"],
        splits=SPLITS,
        seed=1,
    )

    report.assert_ok()
    assert report.splits == SPLITS
    final = [r for r in report.results if r.flow == "signal_windows_final"]
    assert all(r.compared_rows > 0 and r.excluded_rows == 0 for r in final)


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
