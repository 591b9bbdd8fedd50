"""The CloudTrail pipeline as real streaming queries over generated files (in-process)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from streamsmith.apps import get_app
from streamsmith.apps.cloudtrail import DAILY_ACTIVITY
from streamsmith.config import Trigger, load_spec
from streamsmith.generate.cloudtrail import CorruptKind, generate_cloudtrail
from streamsmith.io.lake import read_table, register_lake_views
from streamsmith.runtime.plan import Plan, build_plan
from streamsmith.runtime.runner import backfill, full_refresh, run_pipeline

REASON_OF_KIND = {
    CorruptKind.TRUNCATED_GZIP: "unreadable file: truncated gzip file",
    CorruptKind.NOT_JSON: "file is not a JSON document",
    CorruptKind.NO_RECORDS: "file has no Records array",
    CorruptKind.MISSING_EVENT_ID: "missing required field eventID",
    CorruptKind.MISSING_EVENT_TIME: "missing required field eventTime",
    CorruptKind.BAD_EVENT_TIME: "unparseable eventTime",
    CorruptKind.NOT_AN_OBJECT: "record is not a JSON object",
    CorruptKind.WRONG_TYPE: "record has fields of the wrong type",
}


def cloudtrail_plan(root: Path, *sets: str) -> Plan:
    app = get_app("cloudtrail")
    return build_plan(
        app,
        load_spec(app.default_spec, sets=sets, storage_root=str(root)),
        Trigger("available-now"),
    )


def event_ids(spark: SparkSession, root: Path) -> list[str]:
    register_lake_views(spark, root)
    return [row.eventID for row in spark.table("cloudtrail_events").select("eventID").collect()]


def test_available_now_processes_backlog_then_only_new_files(
    spark: SparkSession, tmp_path: Path
) -> None:
    plan = cloudtrail_plan(tmp_path, "sources.cloudtrail_logs.max_files_per_trigger=2")
    inbox = tmp_path / "input/cloudtrail"
    first = generate_cloudtrail(inbox, files=5, records_per_file=30, seed=11)

    report = run_pipeline(spark, plan)

    assert [(q.name, q.batches, q.input_rows) for q in report.queries] == [
        ("cloudtrail.cloudtrail_events", 3, 5),  # 2 + 2 + 1 files under maxFilesPerTrigger=2
        ("cloudtrail.cloudtrail_events.quarantine", 3, 5),
    ]
    ids = event_ids(spark, tmp_path)
    assert len(ids) == 150 and set(ids) == first.valid_event_ids

    second = generate_cloudtrail(
        inbox, files=3, records_per_file=30, seed=12, start=dt.datetime(2026, 11, 24, tzinfo=dt.UTC)
    )
    report = run_pipeline(spark, plan)

    assert [q.input_rows for q in report.queries] == [3, 3]
    ids = event_ids(spark, tmp_path)
    assert len(ids) == 240
    assert set(ids) == first.valid_event_ids | second.valid_event_ids
    dates = {r.date for r in spark.table("cloudtrail_events").select("date").distinct().collect()}
    assert dates == {dt.date(2026, 11, d) for d in (20, 21, 22, 24, 25, 26)}  # 3-day spans
    # The app's materialized view was recomputed after the run: the same as its query now.
    assertDataFrameEqual(
        read_table(spark, tmp_path / "tables/cloudtrail_daily_activity"), spark.sql(DAILY_ACTIVITY)
    )

    assert run_pipeline(spark, plan).queries[0].input_rows == 0  # nothing new to read


def test_every_corrupt_kind_is_quarantined_and_counts_reconcile(
    spark: SparkSession, tmp_path: Path
) -> None:
    plan = cloudtrail_plan(tmp_path)
    generated = generate_cloudtrail(
        tmp_path / "input/cloudtrail", files=20, records_per_file=20, seed=5, corrupt_fraction=0.5
    )

    run_pipeline(spark, plan)

    register_lake_views(spark, tmp_path)
    table = spark.table("cloudtrail_events")
    quarantine = spark.table("cloudtrail_events_quarantine").collect()
    counted = {
        kind.value: sum(1 for row in quarantine if row.reason.startswith(reason))
        for kind, reason in REASON_OF_KIND.items()
    }
    assert counted == generated.by_kind
    assert set(generated.by_kind) == {kind.value for kind in CorruptKind}
    assert table.count() == generated.valid_records
    assert len(quarantine) == generated.quarantine_rows
    assert {r.eventID for r in table.select("eventID").collect()} == generated.valid_event_ids
    for row in quarantine:
        assert row.source_file.endswith(".json.gz") and row.raw and row.ingested_at
        if row.position is not None:
            assert row.position.startswith("Records[")


def test_backfill_equals_stream_and_full_refresh_reprocesses(
    spark: SparkSession, tmp_path: Path
) -> None:
    plan = cloudtrail_plan(tmp_path, "sources.cloudtrail_logs.max_files_per_trigger=3")
    generate_cloudtrail(
        tmp_path / "input/cloudtrail", files=8, records_per_file=25, seed=9, corrupt_fraction=0.2
    )
    run_pipeline(spark, plan)

    report = backfill(spark, plan)

    tables = register_lake_views(spark, tmp_path)
    assert set(tables) == {
        "cloudtrail_events",
        "cloudtrail_events_quarantine",
        "cloudtrail_events_backfill",
        "cloudtrail_events_quarantine_backfill",
        "cloudtrail_daily_activity",  # the app's materialized view, refreshed by the run
    }
    assertDataFrameEqual(
        spark.table("cloudtrail_events"), spark.table("cloudtrail_events_backfill")
    )
    lineage = ["reason", "source_file", "position", "raw"]
    assertDataFrameEqual(
        spark.table("cloudtrail_events_quarantine").select(lineage),
        spark.table("cloudtrail_events_quarantine_backfill").select(lineage),
    )
    assert report.rows["cloudtrail_events"] == spark.table("cloudtrail_events").count()

    removed = full_refresh(plan)
    assert str(tmp_path / "checkpoints/cloudtrail") in removed
    assert not (tmp_path / "tables/cloudtrail_events").exists()
    run_pipeline(spark, plan)
    assertDataFrameEqual(
        read_table(spark, tmp_path / "tables/cloudtrail_events"),
        spark.table("cloudtrail_events_backfill"),
    )


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_line_formats_route_malformed_rows_to_quarantine(
    spark: SparkSession, tmp_path: Path, fmt: str
) -> None:
    """The generic readers tag malformed lines so any app can quarantine them."""
    import gzip

    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    from streamsmith.config import SourceSpec
    from streamsmith.io.files import read_files
    from streamsmith.transforms.quarantine import READ_ERROR, REJECT_REASON, accepted, quarantined

    schema = StructType([StructField("user", StringType()), StructField("n", IntegerType())])
    lines = (
        ['{"user": "a", "n": 1}', "{broken", '{"user": "b", "n": 2}']
        if fmt == "jsonl"
        else ["a,1", "b,not-a-number", "c,3"]
    )
    (tmp_path / f"part.{fmt}.gz").write_bytes(gzip.compress("\n".join(lines).encode()))
    source = SourceSpec(format=fmt, path=str(tmp_path))  # type: ignore[arg-type]

    frame = read_files(spark, source, str(tmp_path), schema, streaming=False)
    tagged = frame.withColumn(REJECT_REASON, frame[READ_ERROR])

    good = sorted((r.user, r.n) for r in accepted(tagged).collect())
    bad = quarantined(tagged).collect()
    assert good == ([("a", 1), ("b", 2)] if fmt == "jsonl" else [("a", 1), ("c", 3)])
    assert [(r.reason, r.raw) for r in bad] == [
        ("malformed JSON line", "{broken")
        if fmt == "jsonl"
        else ("malformed CSV row", "b,not-a-number")
    ]
    assert bad[0].source_file.endswith(f"part.{fmt}.gz")


def test_latest_first_processes_newest_files_first(spark: SparkSession, tmp_path: Path) -> None:
    """The e-book's backlog-plus-live recipe: new files land before the old backlog."""
    import json
    import os

    plan = cloudtrail_plan(
        tmp_path,
        "sources.cloudtrail_logs.max_files_per_trigger=1",
        "sources.cloudtrail_logs.latest_first=true",
    )
    generated = generate_cloudtrail(
        tmp_path / "input/cloudtrail", files=3, records_per_file=5, seed=2
    )
    for age, path in enumerate(reversed(generated.paths)):  # the last file written is the newest
        os.utime(path, (1_700_000_000 - age * 3600, 1_700_000_000 - age * 3600))

    run_pipeline(spark, plan)

    log = plan.outputs[0].checkpoint / "sources/0"
    order = [
        json.loads((log / str(batch)).read_text().splitlines()[1])["path"] for batch in range(3)
    ]
    assert [Path(p.removeprefix("file:")).name for p in order] == [
        Path(p).name for p in reversed(generated.paths)
    ]
