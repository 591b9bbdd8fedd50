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


def run_signals_demo(root: Path, *, devices: int, events: int, console: Console) -> dict[str, int]:
    """IoT signals with late and too-late events into an embedded PostgreSQL, reconciled.

    Starts PostgreSQL under ``root/postgres`` (stopped again at the end; ``streamsmith db
    start --root ROOT`` brings it back), writes six chunks of signals, runs every flow with
    ``available-now`` one chunk per micro-batch, and accounts for every event.
    """
    import psycopg

    from streamsmith.generate.events import Knobs, write_chunks
    from streamsmith.generate.signals import signals_data
    from streamsmith.io.lake import read_table, table_path
    from streamsmith.io.postgres.server import embedded_home, start_postgres, stop_postgres

    root = root.resolve()
    check_storage_root(root.parent if not root.exists() else root)
    if root.exists():
        stop_postgres(embedded_home(root), "immediate")
        shutil.rmtree(root)
    started = time.monotonic()
    server = start_postgres(embedded_home(root))
    try:
        knobs = Knobs(out_of_order=0.1, late=0.05, too_late=0.02, corrupt=0.01)
        data = signals_data(devices=devices, events=events, chunks=6, seed=11, knobs=knobs)
        write_chunks(data, root / "input/signals", "signals")
        labels = ", ".join(f"{n} {label}" for label, n in sorted(data.label_counts.items()))
        console.print(
            f"1. started PostgreSQL on 127.0.0.1:{server.port}; wrote {len(data.delivered)} "
            f"signals in 6 files ({labels})",
            highlight=False,
            soft_wrap=True,
        )
        app = get_app("signals")
        spec = load_spec(
            app.default_spec,
            sets=["sources.signals.max_files_per_trigger=1"],
            storage_root=str(root),
        )
        spark = build_session(spec.spark, "streamsmith-demo-signals")
        run_pipeline(spark, build_plan(app, spec, Trigger("available-now")), threading.Event())
        console.print("2. ran the signals app: PostgreSQL (update), lake (append), memory")
        with psycopg.connect(server.dsn) as conn:
            windows = conn.execute(
                'SELECT "deviceId", window_start, window_end, events, '
                "round(avg_signal::numeric, 2) FROM signal_windows "
                "ORDER BY window_start DESC, 1 LIMIT 8"
            ).fetchall()
            counted = conn.execute("SELECT coalesce(sum(events), 0) FROM signal_windows").fetchone()
        table = Table(
            title="3. newest windows in PostgreSQL (signal_windows)", title_justify="left"
        )
        for column in ("deviceId", "window_start", "window_end", "events", "avg_signal"):
            table.add_column(column)
        for row in windows:
            table.add_row(*(str(value) for value in row))
        console.print(table)
        late = read_table(spark, table_path(root, "signal_windows_late"))
        dropped = int(late.agg({"windows_dropped": "sum"}).first()[0] or 0)  # type: ignore[index]
        quarantined = read_table(spark, table_path(root, "signal_windows_quarantine")).count()
        valid = len(data.delivered) - quarantined
        pairs = int(counted[0]) if counted else 0
        balanced = pairs + dropped == 2 * valid and quarantined == data.label_counts["corrupt"]
        console.print(
            f"reconciliation: {len(data.delivered)} events = {valid} valid + {quarantined} "
            f"quarantined; {valid} valid x 2 windows = {pairs} counted in PostgreSQL + "
            f"{dropped} dropped as too late ({late.count()} events in signal_windows_late) "
            f"({'ok' if balanced else 'MISMATCH'}); done in {time.monotonic() - started:.0f} s",
            highlight=False,
            soft_wrap=True,
        )
        return {"valid": valid, "counted": pairs, "dropped": dropped, "quarantined": quarantined}
    finally:
        stop_postgres(embedded_home(root))
