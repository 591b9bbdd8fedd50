"""``streamsmith demo``: an app end to end on embedded defaults, in one Spark session.

The main demo is the security platform (``secops``): generated network logs with injected
incidents go through every flow in two scheduled catch-ups, with a model trained on the
lake in between; the demo prints the alerts raised, what reached Kafka, the report and an
ad-hoc answer, and reconciles every input line. The others show one seed application
each: CloudTrail files to the lake, Nest snapshots through Kafka, IoT signals into
PostgreSQL.
"""

from __future__ import annotations

import shutil
import threading
import time
from datetime import date
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from rich.console import Console

from streamsmith.apps import get_app
from streamsmith.config import Trigger, load_spec
from streamsmith.console import rows_table, say
from streamsmith.errors import UserError
from streamsmith.generate.cloudtrail import generate_cloudtrail
from streamsmith.generate.deliver import Topic
from streamsmith.generate.secops import SecopsData
from streamsmith.io.lake import register_lake_views
from streamsmith.object_store import local_only
from streamsmith.runtime.plan import build_plan, check_storage_root
from streamsmith.runtime.runner import RunReport, run_pipeline
from streamsmith.spark.session import build_session

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
    "the materialized view: the APIs failing most, per day": (
        "SELECT date, eventName, failed_calls, calls FROM cloudtrail_daily_activity "
        "WHERE failed_calls > 0 ORDER BY failed_calls DESC, date, eventName LIMIT 5"
    ),
    "ad-hoc: who was denied most often?": (
        "SELECT coalesce(userIdentity_arn, userIdentity_invokedBy, userIdentity_type) "
        "AS principal, count(*) AS denied_calls, "
        "max(eventTime) AS last_denied FROM cloudtrail_events "
        "WHERE errorCode = 'AccessDenied' GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 5"
    ),
}


DEMO_MARKER = ".streamsmith-demo"
"""The file a demo writes into the root it creates: only a folder holding it is cleared."""


def fresh_root(root: Path) -> Path:
    """``root`` made absolute, writable and empty: a demo starts from nothing each time.

    Only a folder the demo itself made (it holds ``DEMO_MARKER``) is deleted; an empty
    folder is used as it is. Anything else, and the current directory, the home directory,
    ``/`` or a folder holding one of them, is refused: ``--root .`` must not wipe a project.
    """
    root = check_demo_root(root)
    check_storage_root(root.parent if not root.exists() else root)
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / DEMO_MARKER).write_text("made by streamsmith demo: cleared by the next one\n")
    return root


def check_demo_root(root: Path) -> Path:
    """``root`` made absolute when a demo may clear it; UserError saying why not otherwise."""
    root = local_only(root, "a demo").resolve()
    places = {"the current directory": Path.cwd(), "the home directory": Path.home()}
    for kind, place in ((kind, place.resolve()) for kind, place in places.items()):
        if root == place or root in place.parents:
            what = "is" if root == place else "holds"
            raise UserError(
                f"--root {root} {what} {kind}, which a demo would clear: "
                "give a new folder for the demo, e.g. --root streamsmith-demo"
            )
    if root == Path(root.anchor):
        raise UserError(f"--root {root} is the file system's root: give a new folder")
    if root.exists() and not (root.is_dir() and _made_by_a_demo_or_empty(root)):
        raise UserError(
            f"--root {root} exists and was not made by streamsmith demo (it has no "
            f"{DEMO_MARKER} file): the demo clears its root, so give a new or empty folder, "
            "or remove this one yourself"
        )
    return root


def _made_by_a_demo_or_empty(folder: Path) -> bool:
    return (folder / DEMO_MARKER).is_file() or not any(folder.iterdir())


def run_cloudtrail_demo(
    root: Path, *, files: int, records_per_file: int, console: Console
) -> dict[str, int]:
    """Run the demo under ``root`` (cleared first); returns the reconciliation counts."""
    root = fresh_root(root)
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
    say(
        console,
        f"1. generated {report.files_written} CloudTrail files in {input_dir}: "
        f"{report.valid_records} valid records and {report.quarantine_rows} corrupt items",
    )
    with console.status("starting Spark"):
        spark = build_session(spec.spark, "streamsmith-demo")
    with console.status("running the cloudtrail pipeline (available-now)"):
        run = run_pipeline(spark, plan, threading.Event())
    batches = ", ".join(f"{q.name}: {q.batches} batches" for q in run.queries)
    console.print(f"2. ran the pipeline to the end of its backlog ({batches})", highlight=False)

    register_lake_views(spark, root)
    for number, (title, sql) in enumerate(QUESTIONS.items(), start=3):
        print_frame(console, f"{number}. {title}", spark.sql(sql))
    landed = spark.table("cloudtrail_events").count()
    quarantined = spark.table("cloudtrail_events_quarantine").count()
    balanced = landed == report.valid_records and quarantined == report.quarantine_rows
    say(
        console,
        f"reconciliation: {report.valid_records + report.quarantine_rows} input items = "
        f"{landed} in cloudtrail_events + {quarantined} in quarantine "
        f"({'ok' if balanced else 'MISMATCH'})",
    )
    say(
        console,
        f"done in {time.monotonic() - started:.0f} s. Ask your own questions with:\n"
        f'  streamsmith query --root {root} "SELECT eventName, count(*) FROM cloudtrail_events '
        'GROUP BY 1 ORDER BY 2 DESC"',
    )
    return {
        "input": report.valid_records + report.quarantine_rows,
        "table": landed,
        "quarantine": quarantined,
    }


def run_nest_demo(root: Path, *, devices: int, events: int, console: Console) -> dict[str, int]:
    """The Nest app on an embedded broker: publish snapshots, run both flows, report."""
    from streamsmith.apps.nest import APP, LOGS_TOPIC, STATS_TOPIC, sightings_report
    from streamsmith.generate.deliver import deliver_nest, write_device_locations
    from streamsmith.generate.nest import nest_data
    from streamsmith.io.kafka.broker import start_broker

    root = fresh_root(root)
    started = time.monotonic()
    with start_broker(root / "broker") as broker:
        Topic(broker.bootstrap, STATS_TOPIC, 1).create()
        data = nest_data(devices=devices, events=events, seed=7, corrupt_fraction=0.01)
        deliver_nest(data, Topic(broker.bootstrap, LOGS_TOPIC, 3))
        write_device_locations(data, root)
        say(
            console,
            f"1. started an embedded broker on {broker.bootstrap}, sent {len(data.messages)} "
            f"Nest snapshots ({data.camera_records} camera records, {data.corrupt_messages} "
            f"corrupt) to {LOGS_TOPIC}, wrote {len(data.locations)} device locations",
        )
        overrides = {"kafka": {"bootstrap_servers": broker.bootstrap}}
        spec = load_spec(APP.default_spec, overrides=overrides, storage_root=str(root))
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
        title = (
            f"4. report: zip codes and hours with more than {threshold} person sightings "
            f"(from {STATS_TOPIC})"
        )
        rows = frame.collect()
        console.print(rows_table(frame.columns, rows[:15], title))
    console.print(f"done in {time.monotonic() - started:.0f} s", highlight=False)
    return {"camera_records": archived, "quarantined": quarantined, "report_rows": len(rows)}


def run_signals_demo(root: Path, *, devices: int, events: int, console: Console) -> dict[str, int]:
    """IoT signals with late and too-late events into an embedded PostgreSQL, reconciled.

    Starts PostgreSQL under ``root/postgres`` (stopped again at the end; ``streamsmith db
    start --root ROOT`` brings it back), writes six chunks of signals, runs every flow with
    ``available-now`` one chunk per micro-batch, and accounts for every event.
    """
    import psycopg

    from streamsmith.generate.deliver import deliver_events
    from streamsmith.generate.events import Knobs
    from streamsmith.generate.signals import signals_data
    from streamsmith.io.lake import read_table, table_path
    from streamsmith.io.postgres.server import embedded_home, start_postgres, stop_postgres

    if check_demo_root(root).exists():  # a demo's own root: its server stops before clearing
        stop_postgres(embedded_home(root.resolve()), "immediate")
    root = fresh_root(root)
    started = time.monotonic()
    server = start_postgres(embedded_home(root))
    try:
        knobs = Knobs(out_of_order=0.1, late=0.05, too_late=0.02, corrupt=0.01)
        data = signals_data(devices=devices, events=events, chunks=6, seed=11, knobs=knobs)
        deliver_events(data, root / "input/signals", "signals")
        labels = ", ".join(f"{n} {label}" for label, n in sorted(data.label_counts.items()))
        say(
            console,
            f"1. started PostgreSQL on 127.0.0.1:{server.port}; wrote {len(data.delivered)} "
            f"signals in 6 files ({labels})",
        )
        app = get_app("signals")
        overrides = {"sources": {"signals": {"max_files_per_trigger": 1}}}
        spec = load_spec(app.default_spec, overrides=overrides, storage_root=str(root))
        spark = build_session(spec.spark, "streamsmith-demo-signals")
        run_pipeline(spark, build_plan(app, spec, Trigger("available-now")), threading.Event())
        console.print("2. ran the signals app: to PostgreSQL (update), lake (append), memory")
        with psycopg.connect(server.dsn) as conn:
            windows = conn.execute(
                'SELECT "deviceId", window_start, window_end, events, '
                "round(avg_signal::numeric, 2) FROM signal_windows "
                "ORDER BY window_start DESC, 1 LIMIT 8"
            ).fetchall()
            counted = conn.execute("SELECT coalesce(sum(events), 0) FROM signal_windows").fetchone()
        columns = ("deviceId", "window_start", "window_end", "events", "avg_signal")
        title = "3. newest windows in PostgreSQL (signal_windows)"
        console.print(rows_table(columns, windows, title))
        late = read_table(spark, table_path(root, "signal_windows_late"))
        dropped = int(late.agg({"windows_dropped": "sum"}).first()[0] or 0)  # type: ignore[index]
        quarantined = read_table(spark, table_path(root, "signal_windows_quarantine")).count()
        valid = len(data.delivered) - quarantined
        pairs = int(counted[0]) if counted else 0
        balanced = pairs + dropped == 2 * valid and quarantined == data.label_counts["corrupt"]
        say(
            console,
            f"reconciliation: {len(data.delivered)} events = {valid} valid + {quarantined} "
            f"quarantined; {valid} valid x 2 windows = {pairs} counted in PostgreSQL + "
            f"{dropped} dropped as too late ({late.count()} events in signal_windows_late) "
            f"({'ok' if balanced else 'MISMATCH'}); done in {time.monotonic() - started:.0f} s",
        )
        return {"valid": valid, "counted": pairs, "dropped": dropped, "quarantined": quarantined}
    finally:
        stop_postgres(embedded_home(root))


SECOPS_DAY = date(2026, 11, 20)
SECOPS_QUESTION = (
    "ad-hoc: where did the failed logins come from?",
    "SELECT src_ip, coalesce(hostname, '(no lease: outside)') AS device, "
    "coalesce(owner, '-') AS owner, count(*) AS failures, count(DISTINCT user) AS users "
    "FROM auth_devices WHERE result = 'failure' GROUP BY 1, 2, 3 ORDER BY 4 DESC, 1 LIMIT 5",
)


def run_secops_demo(root: Path, *, devices: int, console: Console) -> dict[str, float]:
    """The security platform on an embedded broker, as an operator would run it.

    Two hours of a small network's logs (12 ten-minute files per source) arrive in two
    parts. A scheduled catch-up (``available-now``) takes each part through every flow;
    between them the anomaly model is trained on the first hour of ``flow_logs``, and the
    second catch-up scores with it. Alerts go to the ``alerts`` table and, through the
    ``alert_topic`` flow, to the Kafka topic ``alerts``. Returns the figures printed.
    """
    from streamsmith.apps.secops_report import secops_report, train_anomaly_model
    from streamsmith.generate.deliver import deliver_secops, write_assets
    from streamsmith.generate.secops import SOURCES, secops_data
    from streamsmith.io.kafka.broker import start_broker
    from streamsmith.io.lake import read_table, table_path

    root = fresh_root(root)
    started = time.monotonic()
    app = get_app("secops")
    data = secops_data(devices=devices, chunks=12, seed=1, corrupt_fraction=0.01)
    write_assets(data, root)
    inbox = root / "input" / "secops"
    with start_broker(root / "broker") as broker:
        Topic(broker.bootstrap, "alerts", 1).create()
        overrides = {
            "kafka": {"bootstrap_servers": broker.bootstrap},
            "flows": {"alert_topic": {"enabled": True}},
        }
        spec = load_spec(app.default_spec, overrides=overrides, storage_root=str(root))
        plan = build_plan(app, spec, Trigger("available-now"))
        lines = ", ".join(f"{data.events[s]} {s} (+{data.corrupt[s]} corrupt)" for s in SOURCES)
        injected = "; ".join(f"{i.rule} {i.entity}" for i in data.incidents)
        say(console, f"1. generated 2 hours of logs from {devices} devices: {lines}; "
                     f"wrote the asset inventory; incidents injected: {injected}")  # fmt: skip
        with console.status("starting Spark"):
            spark = build_session(spec.spark, "streamsmith-demo-secops")

        deliver_secops(data, inbox, range(0, 6))
        with console.status("catch-up 1: 08:00-09:00 through every flow (available-now)"):
            first = run_pipeline(spark, plan, threading.Event())
        alerts_path = table_path(root, "alerts")
        say(console, f"2. scheduled catch-up over 08:00-09:00: {_batches(first)}; "
                     f"{read_table(spark, alerts_path).count()} alerts so far")  # fmt: skip

        model, current = train_anomaly_model(spark, root)
        say(console, f"3. trained the anomaly model on {model.trained_on} host windows of "
                     f"flow_logs (threshold {model.threshold:.2f}): {current}")  # fmt: skip

        deliver_secops(data, inbox, range(6, 12))
        with console.status("catch-up 2: 09:00-10:00, scored with the new model"):
            second = run_pipeline(spark, plan, threading.Event())
        say(console, f"4. scheduled catch-up over 09:00-10:00: {_batches(second)}")

        figures = _secops_alerts(spark, root, data, broker.bootstrap, console)
        # The broker stays up to the end: Spark's Kafka sink keeps its producer for the
        # session, which would warn every second about a broker gone.
        report = secops_report(spark, spec, SECOPS_DAY)
        say(console, f"6. report for {SECOPS_DAY}: {report.html} (tables "
                     f"{', '.join(sorted(report.tables))})")  # fmt: skip
        register_lake_views(spark, root)
        title, sql = SECOPS_QUESTION
        print_frame(console, f"7. {title}", spark.sql(sql))
        balanced = _secops_reconciled(spark, data, console)
        say(console, f"done in {time.monotonic() - started:.0f} s. Ask your own questions with:\n"
                     f'  streamsmith query --root {root} "SELECT rule, entity, evidence FROM '
                     'alerts"')  # fmt: skip
        return {**figures, "balanced": float(balanced), "threshold": model.threshold}


def _secops_alerts(
    spark: SparkSession, root: Path, data: SecopsData, bootstrap: str, console: Console
) -> dict[str, float]:
    """Print the alerts, score them against the injected incidents, count the topic."""
    from streamsmith.io.kafka.options import SOURCE_NAME
    from streamsmith.io.kafka.source import register_kafka_source
    from streamsmith.io.lake import read_table, table_path

    alerts = read_table(spark, table_path(root, "alerts")).orderBy("first_seen", "rule", "entity")
    print_frame(console, "5. alerts raised", alerts.select(
        "rule", "severity", "entity",
        F.date_format("first_seen", "HH:mm:ss").alias("first seen"),
        F.date_format("last_seen", "HH:mm:ss").alias("last seen")))  # fmt: skip
    raised = {(a.rule, a.entity) for a in alerts.collect()}
    expected = {(i.rule, i.entity) for i in data.incidents}
    hits = len(raised & expected)
    precision, recall = hits / max(len(raised), 1), hits / len(expected)
    register_kafka_source(spark)
    delivered = (
        spark.read.format(SOURCE_NAME)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "alerts")
        .load()
        .count()
    )
    say(console, f"   against the injected incidents: precision {precision:.2f}, recall "
                 f"{recall:.2f}; {delivered} alert messages on the Kafka topic alerts "
                 f"({bootstrap})")  # fmt: skip
    return {
        "alerts": float(len(raised)),
        "precision": precision,
        "recall": recall,
        "delivered": float(delivered),
    }


def _secops_reconciled(spark: SparkSession, data: SecopsData, console: Console) -> bool:
    """Every generated line is in its structured table or its quarantine."""
    from streamsmith.generate.secops import SOURCES

    balanced = True
    parts = []
    for source, table in zip(SOURCES, ("auth_logs", "dhcp_logs", "flow_logs"), strict=True):
        landed = spark.table(table).count()
        quarantined = spark.table(f"{table}_quarantine").count()
        balanced &= landed == data.events[source] and quarantined == data.corrupt[source]
        parts.append(f"{source} {data.events[source] + data.corrupt[source]} lines = "
                     f"{landed} in {table} + {quarantined} quarantined")  # fmt: skip
    say(console, f"reconciliation: {'; '.join(parts)} ({'ok' if balanced else 'MISMATCH'})")
    return balanced


def print_frame(console: Console, title: str, frame: DataFrame, limit: int = 20) -> None:
    """A DataFrame's first rows as a table, nulls shown empty."""
    console.print(rows_table(frame.columns, frame.limit(limit).collect(), title))


def _batches(run: RunReport) -> str:
    return f"{sum(q.batches for q in run.queries)} micro-batches in {len(run.queries)} queries"
