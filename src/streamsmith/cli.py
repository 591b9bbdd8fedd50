"""The ``streamsmith`` command: parses arguments and calls plain functions.

User errors (unknown app, bad spec, missing input, unwritable storage) print one line and
exit 2; a failed query exits 1; everything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from streamsmith.config import PipelineSpec, Trigger, load_spec, parse_duration, parse_trigger
from streamsmith.errors import UserError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamsmith.runtime.app import App

cli = typer.Typer(
    name="streamsmith",
    help="Continuous applications on Spark Structured Streaming: run, backfill, query.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
generate_cli = typer.Typer(help="Write synthetic input for an app.", no_args_is_help=True)
cli.add_typer(generate_cli, name="generate")

out = Console()
err = Console(stderr=True)


def say(text: str, *, to_stderr: bool = False) -> None:
    """Print plain text: no markup, highlighting or wrapping of paths and SQL."""
    (err if to_stderr else out).print(text, markup=False, highlight=False, soft_wrap=True)


SpecFiles = Annotated[
    list[Path] | None,
    typer.Option("-f", "--spec", help="YAML spec layered over the app's default (repeatable)."),
]
Sets = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override one spec value: dotted.key=value (repeatable)."),
]
Root = Annotated[
    str | None,
    typer.Option("--root", help="Storage root (tables, checkpoints, quarantine)."),
]
TriggerOpt = Annotated[
    str | None,
    typer.Option("--trigger", help="available-now | once | interval=<duration>, e.g. interval=10s"),
]


# ---------------------------------------------------------------------------------------
# helpers


def _spec_for(
    app_name: str, files: list[Path] | None, sets: list[str] | None, root: str | None
) -> tuple[App, PipelineSpec]:
    from streamsmith.apps import get_app

    app = get_app(app_name)
    spec = load_spec(app.default_spec, files or (), sets or (), storage_root=root)
    if spec.app != app.name:
        raise UserError(f"the spec is for app {spec.app!r}, but the command names {app.name!r}")
    return app, spec


def _trigger(text: str | None) -> Trigger | None:
    if text is None:
        return None
    try:
        return parse_trigger(text)
    except ValueError as exc:
        raise UserError(f"--trigger: {exc}") from None


def _session(spec: PipelineSpec, name: str) -> SparkSession:
    from streamsmith.session import build_session

    with err.status(f"starting Spark ({spec.spark.master})"):
        return build_session(spec.spark, f"streamsmith-{name}")


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGINT/SIGTERM ask for a graceful stop; a second signal aborts at once."""

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        say(f"{signal.Signals(signum).name}: stopping after the current batch", to_stderr=True)
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _print_rows(rows: list[Any], columns: list[str], title: str | None, fmt: str) -> None:
    if fmt == "json":
        import json

        for row in rows:
            record = (
                row.asDict(recursive=True)
                if hasattr(row, "asDict")
                else dict(zip(columns, row, strict=True))
            )
            say(json.dumps(record, default=str))  # JSON lines: one row per line
        return
    if fmt == "csv":
        import csv

        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows([["" if v is None else v for v in row] for row in rows])
        return
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*["" if value is None else str(value) for value in row])
    out.print(table)


# ---------------------------------------------------------------------------------------
# commands


@cli.command("apps")
def list_apps() -> None:
    """List the reference applications."""
    from streamsmith.apps import APPS

    for app in APPS.values():
        out.print(f"[bold]{app.name}[/bold]: {app.description}")


@cli.command("dry-run")
def dry_run(
    app: str,
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
    trigger: TriggerOpt = None,
) -> None:
    """Validate the spec and print the plan without starting Spark."""
    from streamsmith.runtime.plan import build_plan, describe_plan

    application, pipeline = _spec_for(app, spec, set_, root)
    plan = build_plan(application, pipeline, _trigger(trigger))
    say(describe_plan(plan))


@cli.command("run")
def run(
    app: str,
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
    trigger: TriggerOpt = None,
    full_refresh: Annotated[
        bool, typer.Option("--full-refresh", help="Clear checkpoints and tables first.")
    ] = False,
    sql_port: Annotated[
        int | None,
        typer.Option("--sql-port", help="Serve JDBC on 127.0.0.1:PORT (lake and memory tables)."),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port", help="Serve Prometheus /metrics and /health on 127.0.0.1:PORT."
        ),
    ] = None,
) -> None:
    """Run an app's flows as streaming queries until stopped (or the backlog is done)."""
    from streamsmith.runtime import runner
    from streamsmith.runtime.plan import build_plan, check_inputs, check_storage_root

    if metrics_port is not None:
        set_ = [*(set_ or []), f"monitor.metrics_port={metrics_port}"]
    application, pipeline = _spec_for(app, spec, set_, root)
    plan = build_plan(application, pipeline, _trigger(trigger))
    check_storage_root(plan.root)
    check_inputs(plan)
    for warning in plan.warnings:
        say(f"warning: {warning}", to_stderr=True)
    if full_refresh:
        for path in runner.full_refresh(plan):
            say(f"full refresh: removed {path}", to_stderr=True)
    spark = _session(pipeline, app)
    stop = threading.Event()
    server = _serve_sql(spark, plan.root, sql_port) if sql_port else None
    try:
        with _stop_on_signals(stop):
            say(
                f"running {app}: {len(plan.outputs)} queries, storage root {plan.root}",
                to_stderr=True,
            )
            report = runner.run_pipeline(spark, plan, stop)
    finally:
        if server is not None:
            server.stop()
    for query in report.queries:
        say(f"{query.name}: {query.batches} batches, {query.input_rows} input rows")


@cli.command("backfill")
def backfill(
    app: str,
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
) -> None:
    """Run the app's flows once as batch jobs over all input, into <root>/backfill."""
    from streamsmith.runtime import runner
    from streamsmith.runtime.plan import build_plan, check_inputs, check_storage_root

    application, pipeline = _spec_for(app, spec, set_, root)
    plan = build_plan(application, pipeline)
    check_storage_root(plan.root)
    check_inputs(plan)
    spark = _session(pipeline, app)
    report = runner.backfill(spark, plan)
    for table, rows in report.rows.items():
        say(f"{table}: {rows} rows in {plan.root / 'backfill' / table}")


@cli.command("status")
def status(
    app: Annotated[str | None, typer.Argument(help="Only this app's queries.")] = None,
    root: Root = None,
    fmt: Annotated[str, typer.Option("--format", help="table | csv | json")] = "table",
) -> None:
    """One row per query from the event log: state, last batch, rates, lag, watermark
    delay, state rows, quarantined and late rows, restarts, last error."""
    from streamsmith.monitor.eventlog import read_events
    from streamsmith.monitor.status import query_statuses

    if fmt not in ("table", "csv", "json"):
        raise UserError(f"--format {fmt!r}: use table, csv or json")
    storage = _storage_root(root)
    statuses = query_statuses(read_events(storage, app))
    if not statuses:
        raise UserError(
            f"no runs recorded under {storage}"
            + (f" for app {app!r}" if app else "")
            + ": start one with `streamsmith run`, or pass --root"
        )
    rows = [list(s.as_dict().values()) for s in statuses]
    _print_rows(rows, list(statuses[0].as_dict()), f"queries under {storage}", fmt)


checkpoint_cli = typer.Typer(help="Inspect an app's checkpoints.", no_args_is_help=True)
cli.add_typer(checkpoint_cli, name="checkpoint")


@checkpoint_cli.command("show")
def checkpoint_show(
    app: str,
    flow: Annotated[str | None, typer.Argument(help="Only this flow's queries.")] = None,
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
    rows: Annotated[int, typer.Option("--rows", help="State rows to print per store.")] = 5,
) -> None:
    """Offsets, commits, last batch, and the state stores' metadata and contents."""
    import json

    from streamsmith.runtime.checkpoints import show_checkpoint
    from streamsmith.runtime.plan import build_plan

    application, pipeline = _spec_for(app, spec, set_, root)
    plan = build_plan(application, pipeline)
    flows = [f for f in plan.flows if flow is None or f.name == flow]
    if not flows:
        raise UserError(f"app {app} has no flow {flow!r}: see `streamsmith dry-run {app}`")
    spark = _session(pipeline, "checkpoint")
    for output in (o for f in flows for o in f.outputs):
        view = show_checkpoint(spark, output, rows)
        say(f"{view.query}: {view.path}")
        if not view.exists:
            say("  no checkpoint yet")
            continue
        say(f"  query id {view.query_id}; last batch {view.last_batch}, "
            f"last committed {view.last_commit}")  # fmt: skip
        if view.last_batch != view.last_commit:
            say(f"  batch {view.last_batch} is planned but not committed: it runs again on start")
        for number, offsets in enumerate(view.offsets):
            say(f"  source {number} offsets: {json.dumps(offsets)}")
        for operator, sample in zip(view.operators, view.state_rows, strict=True):
            say(f"  state: operator {operator['operatorId']} {operator['operatorName']} "
                f"store {operator['stateStoreName']}, {operator['numPartitions']} partitions, "
                f"batches {operator['minBatchId']}..{operator['maxBatchId']}, "
                f"{operator['rows']} rows")  # fmt: skip
            for row in sample:
                say(f"    {json.dumps(row, default=str)}")


@cli.command("check-upgrade")
def check_upgrade(
    app: str,
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
) -> None:
    """Say per query whether the current code resumes its checkpoint safely or needs
    --full-refresh, by Spark's rules for changes between restarts; exits 1 if any does."""
    from streamsmith.runtime import checkpoints
    from streamsmith.runtime.plan import build_plan

    application, pipeline = _spec_for(app, spec, set_, root)
    plan = build_plan(application, pipeline)
    spark = _session(pipeline, "check-upgrade")
    verdicts = checkpoints.check_upgrade(spark, plan)
    for verdict in verdicts:
        say(f"{verdict.query}: {verdict.summary}")
    if any(not verdict.resumable for verdict in verdicts):
        raise typer.Exit(1)


@cli.command("dashboard")
def dashboard(
    root: Root = None,
    port: Annotated[int, typer.Option("--port")] = 8050,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            help="Required unless bound to loopback.",
            envvar="STREAMSMITH_DASHBOARD_TOKEN",
        ),
    ] = None,
) -> None:
    """Serve the live monitoring page over the event log until stopped: per query,
    input vs processing rate, batch duration, watermark delay, state rows, lag,
    quarantined and late rows, alerts and failures."""
    from streamsmith.web.server import Dashboard

    server = Dashboard(_storage_root(root), host, port, token).start()
    say(f"dashboard at {server.url} (Ctrl-C stops it)", to_stderr=True)
    stop = threading.Event()
    try:
        with _stop_on_signals(stop):
            stop.wait()
    finally:
        server.stop()


@cli.command("query")
def query(
    sql: str,
    app: Annotated[
        str, typer.Option("--app", help="Take storage root and Spark conf from this app's spec.")
    ] = "cloudtrail",
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
    fmt: Annotated[str, typer.Option("--format", help="table | csv | json")] = "table",
    max_rows: Annotated[
        int, typer.Option("--max-rows", help="Print at most this many rows.")
    ] = 1000,
    server: Annotated[
        str | None,
        typer.Option(
            "--server",
            help="HOST:PORT of `streamsmith sql-server` or `run --sql-port`: query a running "
            "app, memory tables included.",
        ),
    ] = None,
) -> None:
    """Run Spark SQL over every lake table (a view each) and the event log
    (``streamsmith_events``)."""
    if fmt not in ("table", "csv", "json"):
        raise UserError(f"--format {fmt!r}: use table, csv or json")
    if server is not None:
        from streamsmith.runtime.sql_server import beeline_query

        columns, values = beeline_query(server, sql)
        _print_rows(values[:max_rows], columns, None, fmt)
        return
    _, pipeline = _spec_for(app, spec, set_, root)
    if not pipeline.root.is_dir():
        raise UserError(
            f"storage root {pipeline.root} does not exist: run a pipeline first or pass --root"
        )
    spark = _session(pipeline, "query")
    rows, columns = run_sql(spark, pipeline.root, sql, max_rows)
    _print_rows(rows, columns, None, fmt)


def _register_views(spark: Any, root: Path) -> None:
    """Every lake table, and the event log as ``streamsmith_events``."""
    from streamsmith.io.lake import register_lake_views
    from streamsmith.monitor.eventlog import register_event_view

    register_lake_views(spark, root)
    register_event_view(spark, root)


def _serve_sql(spark: Any, root: Path, port: int) -> Any:
    from streamsmith.runtime.sql_server import start_sql_server

    _register_views(spark, root)
    server = start_sql_server(spark, port)
    say(f"serving SQL at {server.jdbc_url} (e.g. streamsmith query --server 127.0.0.1:{port} "
        '"SHOW TABLES")', to_stderr=True)  # fmt: skip
    return server


@cli.command("sql-server")
def sql_server(
    app: Annotated[
        str, typer.Option("--app", help="Take storage root and Spark conf from this app's spec.")
    ] = "cloudtrail",
    root: Root = None,
    port: Annotated[int, typer.Option("--port")] = 10000,
    refresh: Annotated[
        float, typer.Option("--refresh-seconds", help="Re-register new lake tables this often.")
    ] = 30.0,
) -> None:
    """Serve the lake tables over JDBC/ODBC (Spark's Thrift server) on 127.0.0.1 until
    stopped; connect with beeline, a BI tool, or `streamsmith query --server`."""
    _, pipeline = _spec_for(app, None, None, root)
    spark = _session(pipeline, "sql-server")
    server = _serve_sql(spark, pipeline.root, port)
    stop = threading.Event()
    try:
        with _stop_on_signals(stop):
            while not stop.wait(refresh):
                _register_views(spark, pipeline.root)
    finally:
        server.stop()


def run_sql(spark: Any, root: Path, sql: str, max_rows: int) -> tuple[list[Any], list[str]]:
    """Run SQL over the lake's views; SQL errors become UserErrors naming the problem."""
    from pyspark.errors import AnalysisException, ParseException

    _register_views(spark, root)
    try:
        frame = spark.sql(sql)
        rows = frame.limit(max_rows).collect()
    except (AnalysisException, ParseException) as exc:
        message = str(exc).splitlines()[0]
        raise UserError(f"query failed: {message}") from None
    return rows, frame.columns


@generate_cli.command("cloudtrail")
def generate_cloudtrail_files(
    out_dir: Annotated[Path, typer.Option("--out", help="Directory to write AWSLogs/... into.")],
    files: Annotated[int, typer.Option("--files", help="Number of log files.")] = 10,
    records_per_file: Annotated[int, typer.Option("--records-per-file")] = 100,
    seed: Annotated[int, typer.Option("--seed")] = 1,
    corrupt_fraction: Annotated[
        float, typer.Option("--corrupt-fraction", help="0..1; share of corrupt files and records.")
    ] = 0.0,
    start: Annotated[
        str | None, typer.Option("--start", help="First event time, ISO 8601 (UTC if no zone).")
    ] = None,
    span: Annotated[
        str, typer.Option("--span", help="Event times spread over this duration, e.g. 3d.")
    ] = "3d",
) -> None:
    """Write gzipped CloudTrail log files as AWS delivers them."""
    from datetime import timedelta

    from streamsmith.generate.cloudtrail import generate_cloudtrail

    try:
        first = datetime.fromisoformat(start) if start else datetime(2026, 11, 20, tzinfo=UTC)
        if first.tzinfo is None:
            first = first.replace(tzinfo=UTC)
        spread = timedelta(seconds=parse_duration(span))
    except ValueError as exc:
        raise UserError(f"--start/--span: {exc}") from None
    with Progress(
        TextColumn("writing CloudTrail files"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task("files", total=files)
        try:
            report = generate_cloudtrail(
                out_dir,
                files=files,
                records_per_file=records_per_file,
                seed=seed,
                corrupt_fraction=corrupt_fraction,
                start=first,
                span=spread,
                collect_ids=False,
                on_file=lambda _path: progress.advance(task),
            )
        except ValueError as exc:
            raise UserError(str(exc)) from None
    kinds = ", ".join(f"{kind}={count}" for kind, count in sorted(report.by_kind.items()))
    say(
        f"wrote {report.files_written} files to {out_dir}: {report.valid_records} valid records, "
        f"{report.quarantine_rows} corrupt items{' (' + kinds + ')' if kinds else ''}"
    )


def _kafka_target(url: str) -> tuple[str, str]:
    """``kafka://host:port/topic`` -> (bootstrap servers, topic)."""
    if not url.startswith("kafka://") or "/" not in url[len("kafka://") :]:
        raise UserError(
            f"--to {url!r}: write kafka://HOST:PORT/TOPIC, e.g. kafka://127.0.0.1:9092/nest-logs"
        )
    servers, _, topic = url[len("kafka://") :].partition("/")
    if not servers or not topic:
        raise UserError(f"--to {url!r}: both servers and topic are needed")
    return servers, topic


@generate_cli.command("nest")
def generate_nest_snapshots(
    to: Annotated[
        str, typer.Option("--to", help="kafka://HOST:PORT/TOPIC")
    ] = "kafka://127.0.0.1:9092/nest-logs",
    devices: Annotated[int, typer.Option("--devices", help="Number of cameras.")] = 40,
    events: Annotated[int, typer.Option("--events", help="Number of snapshots.")] = 1000,
    seed: Annotated[int, typer.Option("--seed")] = 1,
    corrupt_fraction: Annotated[float, typer.Option("--corrupt-fraction")] = 0.0,
    partitions: Annotated[
        int, typer.Option("--partitions", help="Partitions if the topic is created.")
    ] = 3,
    root: Root = None,
) -> None:
    """Publish Nest snapshots to Kafka and write the device_locations lookup table."""
    from streamsmith.generate.nest import nest_data, publish
    from streamsmith.io.kafka.client import ensure_topic
    from streamsmith.io.lake import replace_static_table, table_path
    from streamsmith.schemas.nest import DEVICE_LOCATIONS_SCHEMA

    servers, topic = _kafka_target(to)
    _, pipeline = _spec_for("nest", None, None, root)
    try:
        data = nest_data(
            devices=devices, events=events, seed=seed, corrupt_fraction=corrupt_fraction
        )
    except ValueError as exc:
        raise UserError(str(exc)) from None
    ensure_topic(servers, topic, partitions)
    sent = publish(data, servers, topic)
    locations = table_path(pipeline.root, "device_locations")
    replace_static_table(locations, data.locations, DEVICE_LOCATIONS_SCHEMA)
    say(
        f"sent {sent} snapshots to {topic} on {servers} ({data.camera_records} camera records, "
        f"{data.corrupt_messages} corrupt); wrote {len(data.locations)} device locations to "
        f"{locations}"
    )


Chunks = Annotated[int, typer.Option("--chunks", help="Files (or produce bursts).", min=1)]
Seed = Annotated[int, typer.Option("--seed")]
OutOfOrder = Annotated[float, typer.Option("--out-of-order", help="Fraction shuffled.")]
Late = Annotated[float, typer.Option("--late", help="Fraction delayed within the watermark.")]
TooLate = Annotated[float, typer.Option("--too-late", help="Fraction delayed past it.")]
Duplicates = Annotated[float, typer.Option("--duplicates", help="Fraction re-sent.")]
Corrupt = Annotated[float, typer.Option("--corrupt", help="Fraction garbled.")]


def _event_target(app: str, to: str | None, root: str | None) -> tuple[Path | None, str]:
    """``--to`` as a directory (default: the app's input folder) or a Kafka URL."""
    if to is not None and to.startswith("kafka://"):
        return None, to
    if to is not None:
        return Path(to), to
    _, pipeline = _spec_for(app, None, None, root)
    source = next(iter(pipeline.sources))
    folder = pipeline.source_path(source)
    assert folder is not None
    return folder, str(folder)


def _emit_events(app: str, make: Any, to: str | None, root: str | None) -> None:
    """Write generated event chunks to files or Kafka and print what each label holds."""
    from streamsmith.generate.events import publish_chunks, write_chunks

    try:
        data = make()
    except ValueError as exc:
        raise UserError(str(exc)) from None
    folder, where = _event_target(app, to, root)
    if folder is None:
        servers, topic = _kafka_target(where)
        from streamsmith.io.kafka.client import ensure_topic

        ensure_topic(servers, topic, 3)
        publish_chunks(data, servers, topic)
    else:
        write_chunks(data, folder, app)
    labels = ", ".join(f"{data.label_counts[label]} {label}" for label in sorted(data.label_counts))
    count = len(data.delivered)
    say(f"wrote {count} {app} events in {data.chunk_count} chunks to {where}: {labels}")


_TO_HELP = "Directory (default: the app's input folder) or kafka://HOST:PORT/TOPIC."


@generate_cli.command("actions")
def generate_actions(
    to: Annotated[str | None, typer.Option("--to", help=_TO_HELP)] = None,
    phones: Annotated[int, typer.Option("--phones")] = 50,
    sessions: Annotated[int, typer.Option("--sessions", help="Open/close pairs.")] = 1000,
    chunks: Chunks = 10,
    seed: Seed = 1,
    out_of_order: OutOfOrder = 0.1,
    late: Late = 0.05,
    too_late: TooLate = 0.02,
    corrupt: Corrupt = 0.01,
    root: Root = None,
) -> None:
    """Phone open/close events (the seeds' first example) as JSON lines."""
    from streamsmith.generate.actions import actions_data
    from streamsmith.generate.events import Knobs

    knobs = Knobs(out_of_order, late, too_late, 0.0, corrupt)
    make = partial(actions_data, phones=phones, sessions=sessions, chunks=chunks, seed=seed)
    _emit_events("actions", partial(make, knobs=knobs), to, root)


@generate_cli.command("signals")
def generate_signals(
    to: Annotated[str | None, typer.Option("--to", help=_TO_HELP)] = None,
    devices: Annotated[int, typer.Option("--devices")] = 10,
    events: Annotated[int, typer.Option("--events")] = 2000,
    chunks: Chunks = 10,
    seed: Seed = 1,
    out_of_order: OutOfOrder = 0.1,
    late: Late = 0.05,
    too_late: TooLate = 0.02,
    corrupt: Corrupt = 0.01,
    root: Root = None,
) -> None:
    """IoT signal readings (eventTime, deviceId, signal) as JSON lines."""
    from streamsmith.generate.events import Knobs
    from streamsmith.generate.signals import signals_data

    knobs = Knobs(out_of_order, late, too_late, 0.0, corrupt)
    make = partial(signals_data, devices=devices, events=events, chunks=chunks, seed=seed)
    _emit_events("signals", partial(make, knobs=knobs), to, root)


@generate_cli.command("activity")
def generate_activity(
    to: Annotated[str | None, typer.Option("--to", help=_TO_HELP)] = None,
    users: Annotated[int, typer.Option("--users", help="1 to 9 (a..i).")] = 9,
    events: Annotated[int, typer.Option("--events")] = 2000,
    chunks: Chunks = 10,
    seed: Seed = 1,
    out_of_order: OutOfOrder = 0.1,
    late: Late = 0.05,
    too_late: TooLate = 0.02,
    duplicates: Duplicates = 0.1,
    corrupt: Corrupt = 0.01,
    root: Root = None,
) -> None:
    """User activity records (the heterogeneity dataset's shape) as JSON lines."""
    from streamsmith.generate.activity import activity_data
    from streamsmith.generate.events import Knobs

    knobs = Knobs(out_of_order, late, too_late, duplicates, corrupt)
    make = partial(activity_data, users=users, events=events, chunks=chunks, seed=seed)
    _emit_events("activity", partial(make, knobs=knobs), to, root)


@generate_cli.command("logs")
def generate_logs(
    to: Annotated[str | None, typer.Option("--to", help=_TO_HELP)] = None,
    hosts: Annotated[int, typer.Option("--hosts")] = 8,
    entries: Annotated[int, typer.Option("--entries")] = 5000,
    chunks: Chunks = 10,
    seed: Seed = 1,
    out_of_order: OutOfOrder = 0.1,
    late: Late = 0.05,
    too_late: TooLate = 0.01,
    duplicates: Duplicates = 0.05,
    corrupt: Corrupt = 0.02,
    root: Root = None,
) -> None:
    """Service log entries (JSON or log4j) in log-collector envelopes, as JSON lines."""
    from streamsmith.generate.events import Knobs
    from streamsmith.generate.logs import logs_data

    knobs = Knobs(out_of_order, late, too_late, duplicates, corrupt)
    make = partial(logs_data, hosts=hosts, entries=entries, chunks=chunks, seed=seed)
    _emit_events("logs", partial(make, knobs=knobs), to, root)


@generate_cli.command("secops")
def generate_secops(
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="Directory holding auth/, dhcp/ and flows/ (default: the app's input "
            "folder) or kafka://HOST:PORT/PREFIX (topics PREFIX-auth, -dhcp, -flows).",
        ),
    ] = None,
    devices: Annotated[int, typer.Option("--devices", help="At least 13.")] = 20,
    chunks: Chunks = 12,
    seed: Seed = 1,
    corrupt: Corrupt = 0.01,
    root: Root = None,
) -> None:
    """Security logs of a small network with injected incidents, and its asset inventory."""
    from streamsmith.generate.secops import SOURCES, publish_secops, secops_data, write_secops
    from streamsmith.io.lake import replace_static_table, table_path
    from streamsmith.schemas.security import ASSETS_SCHEMA

    _, pipeline = _spec_for("secops", None, None, root)
    try:
        data = secops_data(devices=devices, chunks=chunks, seed=seed, corrupt_fraction=corrupt)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if to is not None and to.startswith("kafka://"):
        from streamsmith.io.kafka.client import ensure_topic

        servers, prefix = _kafka_target(to)
        for source in SOURCES:
            ensure_topic(servers, f"{prefix}-{source}", 3)
        publish_secops(data, servers, prefix)
        where = f"topics {prefix}-{{{','.join(SOURCES)}}} on {servers}"
    else:
        folder = Path(to) if to else pipeline.root / "input" / "secops"
        write_secops(data, folder)
        where = str(folder)
    assets = table_path(pipeline.root, "assets")
    replace_static_table(assets, data.assets, ASSETS_SCHEMA)
    counts = ", ".join(f"{data.events[s]} {s} (+{data.corrupt[s]} corrupt)" for s in SOURCES)
    incidents = ", ".join(f"{i.rule} {i.entity}" for i in data.incidents)
    say(f"wrote {counts} in {chunks} chunks to {where}; {len(data.assets)} assets to {assets}")
    say(f"injected incidents: {incidents}")


@generate_cli.command("ysb")
def generate_ysb(
    to: Annotated[str | None, typer.Option("--to", help=_TO_HELP)] = None,
    events: Annotated[int, typer.Option("--events", min=1)] = 100_000,
    rate: Annotated[
        float, typer.Option("--rate", help="Events per second of event time.", min=1)
    ] = 10_000,
    chunks: Chunks = 10,
    seed: Seed = 1,
    corrupt: Corrupt = 0.0,
    root: Root = None,
) -> None:
    """Yahoo Streaming Benchmark ad events as JSON lines, and the ad -> campaign table."""
    from streamsmith.generate import produce_all
    from streamsmith.generate.ysb import write_ysb, ysb_data
    from streamsmith.io.lake import replace_static_table, table_path
    from streamsmith.schemas.ysb import CAMPAIGNS_SCHEMA

    try:
        data = ysb_data(events, rate=rate, chunks=chunks, seed=seed, corrupt_fraction=corrupt)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    folder, where = _event_target("ysb", to, root)
    if folder is None:
        from streamsmith.io.kafka.client import ensure_topic

        servers, topic = _kafka_target(where)
        ensure_topic(servers, topic, 3)
        lines = data.lines
        produce_all(servers, topic, lines, [None] * len(lines))
    else:
        write_ysb(data, folder)
    _, pipeline = _spec_for("ysb", None, None, root)
    campaigns = table_path(pipeline.root, "ysb_campaigns")
    replace_static_table(campaigns, data.campaigns, CAMPAIGNS_SCHEMA)
    say(f"wrote {data.events} ad events (+{data.corrupt} corrupt; {rate:g} per second of "
        f"event time, {data.first_time:%H:%M:%S} to {data.last_time:%H:%M:%S} UTC) in {chunks} "
        f"chunks to {where}; {len(data.campaigns)} ads to {campaigns}")  # fmt: skip


db_cli = typer.Typer(
    help="The embedded PostgreSQL server under the storage root.", no_args_is_help=True
)
cli.add_typer(db_cli, name="db")
PortOpt = Annotated[int | None, typer.Option("--port", help="Loopback port (default: free).")]


def _storage_root(root: str | None) -> Path:
    from streamsmith.config import DEFAULT_STORAGE_ROOT, STORAGE_ROOT_ENV

    return Path(root or os.environ.get(STORAGE_ROOT_ENV) or DEFAULT_STORAGE_ROOT).resolve()


@db_cli.command("start")
def db_start(root: Root = None, port: PortOpt = None) -> None:
    """Start (creating on first use) a PostgreSQL server on 127.0.0.1 for postgres sinks."""
    from streamsmith.io.postgres.dsn import mask_dsn
    from streamsmith.io.postgres.server import STATE_FILE, embedded_home, start_postgres

    home = embedded_home(_storage_root(root))
    server = start_postgres(home, port)
    say(f"PostgreSQL running on 127.0.0.1:{server.port}: {mask_dsn(server.dsn)}")
    say(f"(password in {home / STATE_FILE}; pipelines on this storage root use it by default)")


@db_cli.command("stop")
def db_stop(root: Root = None) -> None:
    """Stop the embedded PostgreSQL server (its data stays for the next start)."""
    from streamsmith.io.postgres.server import embedded_home, stop_postgres

    home = embedded_home(_storage_root(root))
    say("stopped" if stop_postgres(home) else f"no PostgreSQL server running in {home}")


@db_cli.command("status")
def db_status(root: Root = None) -> None:
    """Say whether the embedded PostgreSQL server runs, and where; exit 1 if not."""
    from streamsmith.io.postgres.dsn import mask_dsn
    from streamsmith.io.postgres.server import embedded_home, postgres_status

    home = embedded_home(_storage_root(root))
    server = postgres_status(home)
    if server is None:
        say(f"no PostgreSQL server running in {home}")
        raise typer.Exit(1)
    say(f"running on 127.0.0.1:{server.port}: {mask_dsn(server.dsn)}")


broker_cli = typer.Typer(
    help="The embedded Kafka-protocol broker (Tansu) under the storage root.",
    no_args_is_help=True,
)
cli.add_typer(broker_cli, name="broker")
topic_cli = typer.Typer(help="Kafka topics.", no_args_is_help=True)
cli.add_typer(topic_cli, name="topic")


@broker_cli.command("start")
def broker_start(
    root: Root = None,
    port: PortOpt = None,
    storage: Annotated[
        str,
        typer.Option(
            "--storage",
            help="Tansu storage: memory://tansu/ (topics end with the broker) or "
            "s3://BUCKET/ (kept across restarts; AWS_ENDPOINT, AWS_ACCESS_KEY_ID, ... "
            "from the environment).",
        ),
    ] = "memory://tansu/",
) -> None:
    """Start a broker on 127.0.0.1 that keeps running after this command (pid and log
    under <root>/broker); in memory, its topics end with it."""
    from streamsmith.io.kafka.broker import broker_home, start_broker_daemon

    home = broker_home(_storage_root(root))
    started = start_broker_daemon(home, port, storage)
    say(f"broker running on 127.0.0.1:{started} (storage {storage}; log and pid in {home})")


@broker_cli.command("stop")
def broker_stop(root: Root = None) -> None:
    """Stop the embedded broker."""
    from streamsmith.io.kafka.broker import broker_home, stop_broker_daemon

    home = broker_home(_storage_root(root))
    say("stopped" if stop_broker_daemon(home) else f"no broker running in {home}")


@broker_cli.command("status")
def broker_status(root: Root = None) -> None:
    """Say whether the embedded broker runs and on which port; exit 1 if not."""
    from streamsmith.io.kafka.broker import broker_daemon_port, broker_home

    home = broker_home(_storage_root(root))
    port = broker_daemon_port(home)
    if port is None:
        say(f"no broker running in {home}")
        raise typer.Exit(1)
    say(f"broker running on 127.0.0.1:{port}")


cluster_cli = typer.Typer(
    help="A Spark standalone cluster (master and workers) on 127.0.0.1, from the pyspark "
    "wheel; point spark.master at the URL it prints.",
    no_args_is_help=True,
)
cli.add_typer(cluster_cli, name="cluster")


@cluster_cli.command("start")
def cluster_start(
    root: Root = None,
    workers: Annotated[int, typer.Option("--workers", min=1)] = 2,
    cores: Annotated[int, typer.Option("--cores", help="Cores per worker.", min=1)] = 1,
    memory: Annotated[str, typer.Option("--memory", help="Memory per worker.")] = "2g",
) -> None:
    """Start a master and workers that keep running after this command (pids, logs and
    work directories under <root>/cluster); prints the master URL."""
    from streamsmith.cluster import cluster_home, start_cluster

    home = cluster_home(_storage_root(root))
    with err.status(f"starting a Spark master and {workers} workers"):
        started = start_cluster(home, workers, cores=cores, memory=memory)
    say(started.master_url)
    say(f"master web UI {started.master.web_ui}, {len(started.workers)} workers; logs and "
        f"pids in {home}; run an app on it with --set spark.master={started.master_url}",
        to_stderr=True)  # fmt: skip


@cluster_cli.command("stop")
def cluster_stop(root: Root = None) -> None:
    """Stop the workers (and their executors) and the master; logs stay."""
    from streamsmith.cluster import cluster_home, stop_cluster

    home = cluster_home(_storage_root(root))
    say("stopped" if stop_cluster(home) else f"no cluster running in {home}")


@cluster_cli.command("status")
def cluster_status(root: Root = None) -> None:
    """Say whether the cluster runs, its master URL and live workers; exit 1 if not."""
    from streamsmith.cluster import cluster_home
    from streamsmith.cluster import cluster_status as running_cluster

    home = cluster_home(_storage_root(root))
    cluster = running_cluster(home)
    if cluster is None:
        say(f"no cluster running in {home}")
        raise typer.Exit(1)
    state = cluster.state()
    alive = sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")
    apps = len(state.get("activeapps", []))
    say(f"{cluster.master_url}: {alive} of {len(cluster.workers)} workers alive, {apps} "
        f"running apps; web UI {cluster.master.web_ui}")  # fmt: skip


@topic_cli.command("create")
def topic_create(
    name: str,
    partitions: Annotated[int, typer.Option("--partitions", min=1)] = 1,
    bootstrap: Annotated[
        str | None,
        typer.Option("--bootstrap", help="Kafka servers (default: the embedded broker)."),
    ] = None,
    root: Root = None,
) -> None:
    """Create a topic (an existing one is left as it is)."""
    from streamsmith.io.kafka.broker import broker_daemon_port, broker_home
    from streamsmith.io.kafka.client import ensure_topic

    if bootstrap is None:
        port = broker_daemon_port(broker_home(_storage_root(root)))
        if port is None:
            raise UserError("no embedded broker running: `streamsmith broker start` or --bootstrap")
        bootstrap = f"127.0.0.1:{port}"
    created = ensure_topic(bootstrap, name, partitions)
    say(f"{'created' if created else 'exists:'} topic {name} on {bootstrap}")


report_cli = typer.Typer(help="Batch reports over what the streams produced.", no_args_is_help=True)
cli.add_typer(report_cli, name="report")


@report_cli.command("nest-sightings")
def report_nest_sightings(
    min_count: Annotated[
        int, typer.Option("--min-count", help="Report windows with more sightings.")
    ] = 0,
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
    fmt: Annotated[str, typer.Option("--format", help="table | csv | json")] = "table",
) -> None:
    """Zip codes and hours with many person sightings, from the nest-camera-stats topic."""
    from streamsmith.apps.nest import sightings_report

    _, pipeline = _spec_for("nest", spec, set_, root)
    spark = _session(pipeline, "report")
    frame = sightings_report(spark, pipeline, min_count)
    _print_rows(
        frame.collect(), frame.columns, f"windows with more than {min_count} sightings", fmt
    )


@report_cli.command("secops")
def report_secops(
    day: Annotated[str, typer.Option("--date", help="The day to report, YYYY-MM-DD (UTC).")],
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
    fmt: Annotated[str, typer.Option("--format", help="table | csv | json")] = "table",
) -> None:
    """A day of the security platform: failed logins, top talkers, alerts, as lake tables
    and one HTML page with charts."""
    from datetime import date

    from streamsmith.apps.secops_report import secops_report

    try:
        wanted = date.fromisoformat(day)
    except ValueError:
        raise UserError(f"--date {day!r}: write the day as YYYY-MM-DD") from None
    _, pipeline = _spec_for("secops", spec, set_, root)
    spark = _session(pipeline, "report")
    report = secops_report(spark, pipeline, wanted)
    figures = ", ".join(f"{value} {label}" for label, value in report.counts.items())
    say(f"{wanted}: {figures}")
    for title, rows in (
        ("alerts per rule", report.alerts),
        ("failed logins per user", report.failed_logins[:10]),
        ("top talkers", report.top_talkers),
    ):
        columns = list(rows[0].asDict()) if rows else []
        _print_rows(rows, columns, title, fmt)
    say(f"report: {report.html}; tables: {', '.join(sorted(report.tables))}")


train_cli = typer.Typer(
    help="Train models on the lake for the streams to use.", no_args_is_help=True
)
cli.add_typer(train_cli, name="train")


@train_cli.command("secops-anomaly")
def train_secops_anomaly(
    clusters: Annotated[int, typer.Option("--clusters", help="k of k-means.", min=1)] = 3,
    margin: Annotated[
        float, typer.Option("--margin", help="Threshold = largest training score x margin.")
    ] = 1.5,
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
) -> None:
    """Fit the host anomaly model on flow_logs; the running stream picks it up."""
    from streamsmith.apps.secops_report import train_anomaly_model
    from streamsmith.ml.anomaly import MODEL_NAME

    _, pipeline = _spec_for("secops", spec, set_, root)
    spark = _session(pipeline, "train")
    model, current = train_anomaly_model(spark, pipeline.root, clusters=clusters, margin=margin)
    say(
        f"trained {MODEL_NAME} {model.version} on {model.trained_on} host windows "
        f"(threshold {model.threshold:.3f}); current: {current}"
    )


@cli.command("demo")
def demo(
    app: Annotated[
        str,
        typer.Argument(
            help="secops (the security platform), cloudtrail (files), nest (Kafka) or "
            "signals (PostgreSQL)"
        ),
    ] = "secops",
    root: Annotated[
        Path | None, typer.Option("--root", help="Demo storage root; cleared first.")
    ] = None,
) -> None:
    """Run an app end to end on generated data and show what landed."""
    from streamsmith.demo import (
        run_cloudtrail_demo,
        run_nest_demo,
        run_secops_demo,
        run_signals_demo,
    )

    if app == "secops":
        run_secops_demo(root or Path("streamsmith-demo"), devices=20, console=out)
    elif app == "cloudtrail":
        run_cloudtrail_demo(
            root or Path("streamsmith-demo-cloudtrail"), files=40, records_per_file=250,
            console=out,
        )  # fmt: skip
    elif app == "nest":
        run_nest_demo(root or Path("streamsmith-demo-nest"), devices=60, events=3000, console=out)
    elif app == "signals":
        run_signals_demo(
            root or Path("streamsmith-demo-signals"), devices=8, events=3000, console=out
        )
    else:
        raise UserError(f"no demo for {app!r}: choose secops, cloudtrail, nest or signals")


def main() -> None:
    """Entry point of the console script."""
    try:
        cli()
    except UserError as exc:
        say(f"error: {exc}", to_stderr=True)
        sys.exit(2)
    except Exception as exc:
        from streamsmith.runtime.runner import PipelineError

        if isinstance(exc, PipelineError):
            say(f"error: {exc}", to_stderr=True)
            sys.exit(1)
        raise
