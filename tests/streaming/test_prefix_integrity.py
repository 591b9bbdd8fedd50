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
