"""``streamsmith demo``: the CloudTrail pipeline end to end on embedded defaults.

Generates gzipped CloudTrail logs (a few of them corrupt), runs the streaming pipeline
with ``available-now`` until the backlog is done, then answers questions from the lake
in the same Spark session: rows per date, quarantine by reason, and one ad-hoc query.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from streamsmith.apps import get_app
from streamsmith.config import Trigger, load_spec
from streamsmith.generate.cloudtrail import generate_cloudtrail
from streamsmith.io.lake import register_lake_views
from streamsmith.runtime.plan import build_plan, check_storage_root
from streamsmith.runtime.runner import run_pipeline
from streamsmith.session import build_session

QUESTIONS = {
    "rows per date": (
        "SELECT date, count(*) AS events, count(errorCode) AS failed_calls "
        "FROM cloudtrail_events GROUP BY date ORDER BY date"
    ),
    "quarantined rows by reason": (
        "SELECT CASE WHEN reason LIKE 'unparseable eventTime%' THEN 'unparseable eventTime' "
        "ELSE split(reason, ':')[0] END AS reason, count(*) AS rows "
        "FROM cloudtrail_events_quarantine GROUP BY 1 ORDER BY 2 DESC, 1"
    ),
    "ad-hoc: who was denied most often?": (
        "SELECT coalesce(userIdentity_arn, userIdentity_invokedBy, userIdentity_type) "
        "AS principal, count(*) AS denied_calls, "
        "max(eventTime) AS last_denied FROM cloudtrail_events "
        "WHERE errorCode = 'AccessDenied' GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 5"
    ),
}


def run_cloudtrail_demo(
    root: Path, *, files: int, records_per_file: int, console: Console
) -> dict[str, int]:
    """Run the demo under ``root`` (cleared first); returns the reconciliation counts."""
    root = root.resolve()
    check_storage_root(root.parent if not root.exists() else root)
    if root.exists():
        shutil.rmtree(root)
    app = get_app("cloudtrail")
    spec = load_spec(app.default_spec, storage_root=str(root))
    plan = build_plan(app, spec, Trigger("available-now"))
    input_dir = root / "input/cloudtrail"  # the default spec's source path

    started = time.monotonic()
    report = generate_cloudtrail(
        input_dir,
        files=files,
        records_per_file=records_per_file,
        seed=7,
        corrupt_fraction=0.05,
        collect_ids=False,
    )
    console.print(
        f"1. generated {report.files_written} CloudTrail files in {input_dir}: "
        f"{report.valid_records} valid records and {report.quarantine_rows} corrupt items",
        highlight=False,
        soft_wrap=True,
    )
    with console.status("starting Spark"):
        spark = build_session(spec.spark, "streamsmith-demo")
    with console.status("running the cloudtrail pipeline (available-now)"):
        run = run_pipeline(spark, plan, threading.Event())
    batches = ", ".join(f"{q.name}: {q.batches} batches" for q in run.queries)
    console.print(f"2. ran the pipeline to the end of its backlog ({batches})", highlight=False)

    register_lake_views(spark, root)
    for number, (title, sql) in enumerate(QUESTIONS.items(), start=3):
        frame = spark.sql(sql)
        table = Table(title=f"{number}. {title}", title_justify="left")
        for column in frame.columns:
            table.add_column(column)
        for row in frame.collect():
            table.add_row(*["" if value is None else str(value) for value in row])
        console.print(table)
    landed = spark.table("cloudtrail_events").count()
    quarantined = spark.table("cloudtrail_events_quarantine").count()
    balanced = landed == report.valid_records and quarantined == report.quarantine_rows
    console.print(
        f"reconciliation: {report.valid_records + report.quarantine_rows} input items = "
        f"{landed} in cloudtrail_events + {quarantined} in quarantine "
        f"({'ok' if balanced else 'MISMATCH'})",
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        f"done in {time.monotonic() - started:.0f} s. Ask your own questions with:\n"
        f'  streamsmith query --root {root} "SELECT eventName, count(*) FROM cloudtrail_events '
        'GROUP BY 1 ORDER BY 2 DESC"',
        highlight=False,
        soft_wrap=True,
    )
    return {
        "input": report.valid_records + report.quarantine_rows,
        "table": landed,
        "quarantine": quarantined,
    }


def run_nest_demo(root: Path, *, devices: int, events: int, console: Console) -> dict[str, int]:
    """The Nest app on an embedded broker: publish snapshots, run both flows, report."""
    from streamsmith.apps.nest import APP, LOGS_TOPIC, STATS_TOPIC, sightings_report
    from streamsmith.generate.nest import nest_data, publish
    from streamsmith.io.kafka.broker import start_broker
    from streamsmith.io.kafka.client import ensure_topic
    from streamsmith.io.lake import replace_static_table, table_path
    from streamsmith.schemas.nest import DEVICE_LOCATIONS_SCHEMA

    root = root.resolve()
    check_storage_root(root.parent if not root.exists() else root)
    if root.exists():
        shutil.rmtree(root)
    started = time.monotonic()
    with start_broker(root / "broker") as broker:
        ensure_topic(broker.bootstrap, LOGS_TOPIC, 3)
        ensure_topic(broker.bootstrap, STATS_TOPIC, 1)
        data = nest_data(devices=devices, events=events, seed=7, corrupt_fraction=0.01)
        publish(data, broker.bootstrap, LOGS_TOPIC)
        replace_static_table(
            table_path(root, "device_locations"), data.locations, DEVICE_LOCATIONS_SCHEMA
        )
        console.print(
            f"1. started an embedded broker on {broker.bootstrap}, sent {len(data.messages)} "
            f"Nest snapshots ({data.camera_records} camera records, {data.corrupt_messages} "
            f"corrupt) to {LOGS_TOPIC}, wrote {len(data.locations)} device locations",
            highlight=False,
            soft_wrap=True,
        )
        spec = load_spec(
            APP.default_spec,
            sets=[f"kafka.bootstrap_servers={broker.bootstrap}"],
            storage_root=str(root),
        )
        with console.status("starting Spark"):
            spark = build_session(spec.spark, "streamsmith-demo-nest")
        with console.status("running the nest flows (available-now)"):
            run = run_pipeline(spark, build_plan(APP, spec, Trigger("available-now")))
        batches = ", ".join(f"{q.name}: {q.batches} batches" for q in run.queries)
        console.print(f"2. ran the flows to the end of the topic ({batches})", highlight=False)
        register_lake_views(spark, root)
        archived = spark.table("camera_events").count()
        quarantined = spark.table("camera_events_quarantine").count()
        console.print(
            f"3. camera_events holds {archived} camera records; {quarantined} snapshots in "
            "camera_events_quarantine",
            highlight=False,
        )
        threshold = max(1, sorted(data.sightings.values())[len(data.sightings) // 2])
        frame = sightings_report(spark, spec, threshold)
        table = Table(
            title=f"4. report: zip codes and hours with more than {threshold} person sightings "
            f"(from {STATS_TOPIC})",
            title_justify="left",
        )
        for column in frame.columns:
            table.add_column(column)
        rows = frame.collect()
        for row in rows[:15]:
            table.add_row(*[str(value) for value in row])
        console.print(table)
    console.print(f"done in {time.monotonic() - started:.0f} s", highlight=False)
    return {"camera_records": archived, "quarantined": quarantined, "report_rows": len(rows)}
