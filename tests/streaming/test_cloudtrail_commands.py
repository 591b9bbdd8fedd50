"""The cloudtrail app through the command line, in-process: ``generate``, a catch-up
``run``, ``query`` (and a query that fails), ``backfill``. The tutorial runs each of
these commands in a process of its own (tests/integration/test_init.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from inprocess import in_project, invoke
from streamsmith.generate.cloudtrail import generate_cloudtrail
from streamsmith.io.lake import read_table


def test_generate_run_query_and_backfill(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_project(monkeypatch, tmp_path)
    root = tmp_path / "lake"
    generated = invoke(
        "generate", "cloudtrail", "--out", str(root / "input/cloudtrail"), "--files", "6",
        "--records-per-file", "40", "--seed", "4", "--corrupt-fraction", "0.2",
    )  # fmt: skip
    assert generated.returncode == 0, generated.stderr
    assert generated.stdout.startswith(f"wrote 6 files to {root}/input/cloudtrail")
    expected = generate_cloudtrail(
        tmp_path / "same", files=6, records_per_file=40, seed=4, corrupt_fraction=0.2
    )
    assert f"{expected.valid_records} valid records" in generated.stdout

    ran = invoke("run", "cloudtrail", "--root", str(root), "--trigger", "available-now")
    assert ran.returncode == 0, ran.stderr
    (summary,) = [
        s for s in ran.stdout.splitlines() if s.startswith("cloudtrail.cloudtrail_events:")
    ]
    assert summary.startswith("cloudtrail.cloudtrail_events: 1 batches, ")
    assert summary.endswith(f" records read, {expected.valid_records} rows written")

    sql = (
        "SELECT (SELECT count(*) FROM cloudtrail_events) AS events, "
        "(SELECT count(DISTINCT eventID) FROM cloudtrail_events) AS ids, "
        "(SELECT count(*) FROM cloudtrail_events_quarantine) AS quarantined"
    )
    queried = invoke("query", sql, "--root", str(root), "--format", "csv")
    assert queried.returncode == 0, queried.stderr
    assert queried.stdout.splitlines() == [
        "events,ids,quarantined",
        f"{expected.valid_records},{expected.valid_records},{expected.quarantine_rows}",
    ]

    bad_sql = invoke("query", "SELECT nope FROM cloudtrail_events", "--root", str(root))
    assert bad_sql.returncode == 2, bad_sql.stderr
    (line,) = [line for line in bad_sql.stderr.splitlines() if line.startswith("error:")]
    assert "query failed:" in line and "nope" in line, line

    backfilled = invoke("backfill", "cloudtrail", "--root", str(root))
    assert backfilled.returncode == 0, backfilled.stderr
    assert f"cloudtrail_events: {expected.valid_records} rows" in backfilled.stdout
    assert read_table(spark, root / "backfill/cloudtrail_events").count() == expected.valid_records
