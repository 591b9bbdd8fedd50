"""Running an app: apps, dry-run, run and backfill."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Annotated

import typer

from streamsmith.cli.common import (
    AppOrSpec,
    Root,
    Sets,
    SpecFiles,
    TriggerOpt,
    out,
    say,
    session,
    spec_for,
    stop_on_signals,
    trigger,
)
from streamsmith.errors import UserError

if TYPE_CHECKING:
    from collections.abc import Callable

    from streamsmith.config import PipelineSpec, Trigger
    from streamsmith.runtime.app import App
    from streamsmith.runtime.plan import Plan


def list_apps() -> None:
    """List the reference applications and the pipelines installed packages expose."""
    from streamsmith.apps import ENTRY_POINT_GROUP, REFERENCE_APPS, installed_pipelines
    from streamsmith.io.plugins import entry_point_names

    for name, description in REFERENCE_APPS.items():
        out.print(f"[bold]{name}[/bold]: {description}")
    if not entry_point_names(ENTRY_POINT_GROUP):
        return  # nothing installed: no pipeline code (nor PySpark) to load
    for app in installed_pipelines():
        out.print(f"[bold]{app.name}[/bold]: {app.description} (installed pipeline)")


def dry_run(
    app: AppOrSpec = None,
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
    trigger_: TriggerOpt = None,
    plan_only: Annotated[
        bool, typer.Option("--plan-only", help="Print the plan only: start no Spark.")
    ] = False,
) -> None:
    """Validate the spec and print the plan; then let Spark analyse each flow whose code
    the spec names (SQL, `module:function`) or that has expectations against its source's
    schema, as `run` does before it starts a query: a mistake fails here, in the same one
    line. Nothing is read or written (a schema `infer`s from the input is not stored)."""
    from streamsmith.runtime.describe import describe_plan
    from streamsmith.runtime.plan import build_plan

    application, pipeline = spec_for(app, spec, set_, root, keep_inferred=False)
    plan = build_plan(application, pipeline, trigger(trigger_))
    say(describe_plan(plan))
    from streamsmith.runtime.start import analyse_flows, analysed_flows

    flows = analysed_flows(plan)
    names = ", ".join(f"flow {flow.name}" for flow in flows)
    if plan_only:
        if flows:  # what a flow's output holds only Spark's analysis knows
            names += "; the columns their code, expectations, sinks and cdc name"
            say(f"not analysed (--plan-only): {names} are checked by `streamsmith dry-run`",
                to_stderr=True)  # fmt: skip
        return
    if flows:
        analyse_flows(session(pipeline, application.name), plan)
        whose = "its source" if len(flows) == 1 else "their sources"
        say(f"analysed by Spark against {whose}: {names}")


def run(
    app: AppOrSpec = None,
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
    trigger_: TriggerOpt = None,
    full_refresh: Annotated[
        bool, typer.Option("--full-refresh", help="Clear checkpoints and tables first.")
    ] = False,
    full_refresh_tables: Annotated[
        list[str] | None,
        typer.Option(
            "--full-refresh-table",
            help="Rebuild this table: clear it, its flow's checkpoints, and the tables "
            "read from it, downstream (repeatable).",
        ),
    ] = None,
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
    """Run an app's flows as streaming queries until stopped (or the backlog is done);
    with a `schedule` in the spec, stay up and run each catch-up when it is due."""
    from streamsmith.cli.sql import serve_sql
    from streamsmith.runtime import runner
    from streamsmith.runtime.plan import build_plan, check_inputs, check_storage_root

    overrides = {"monitor": {"metrics_port": metrics_port}} if metrics_port is not None else None
    stop = threading.Event()
    with stop_on_signals(stop, announce=None):
        loaded = _loaded_with_input(
            lambda: spec_for(app, spec, set_, root, overrides=overrides), trigger(trigger_), stop
        )
    if loaded is None:
        return  # stopped while it waited for its first input
    application, pipeline = loaded
    plan = build_plan(application, pipeline, trigger(trigger_))
    check_storage_root(plan.root)
    check_inputs(plan)
    for warning in plan.warnings:
        say(f"warning: {warning}", to_stderr=True)
    if full_refresh and full_refresh_tables:
        raise UserError("--full-refresh clears every table: give it or --full-refresh-table")
    if full_refresh or full_refresh_tables:
        for path in runner.full_refresh(plan, full_refresh_tables or ()):
            say(f"full refresh: removed {path}", to_stderr=True)
        for line in runner.restore_archives(plan, full_refresh_tables or ()):
            say(f"full refresh: {line}", to_stderr=True)
    elif sql_port is None and not plan.schedules and _nothing_new(plan):
        return
    spark = session(pipeline, application.name, client_compiler=_short_lived(plan, sql_port))
    server = serve_sql(spark, plan.root, sql_port) if sql_port else None
    try:
        with stop_on_signals(stop):
            queries = f"{len(plan.outputs)} queries, storage root {plan.root}"
            say(f"running {application.name}: {queries}", to_stderr=True)
            for schedule in plan.schedules:
                say(f"schedule {schedule.name}: {schedule.cron} (UTC)", to_stderr=True)
            report = runner.run_pipeline(spark, plan, stop)
    finally:
        if server is not None:
            server.stop()
    for query in report.queries:
        say(query.summary())


def _loaded_with_input(
    load: Callable[[], tuple[App, PipelineSpec]], override: Trigger | None, stop: threading.Event
) -> tuple[App, PipelineSpec] | None:
    """``load()``; where a source whose schema is inferred has no input yet, an always-on
    run waits for its first input (says so once), then loads again and infers; None when
    ``stop`` is set while it waits. A catch-up has nothing to wait for: it fails saying
    what to deliver."""
    from streamsmith.config import parse_trigger
    from streamsmith.pipelines import AwaitingInput

    said = False
    while True:
        try:
            return load()
        except AwaitingInput as exc:
            spec = exc.spec
            flows = [f for f in spec.flows.values() if f.enabled and f.source == exc.source]
            triggers = [override or parse_trigger(f.trigger or spec.trigger) for f in flows]
            scheduled = spec.schedule is not None or any(f.schedule for f in flows)
            if scheduled or any(t.terminates for t in triggers):
                raise
            if not said:
                say(f"waiting for the first input in {exc.place} to infer the schema of "
                    f"source {exc.source}", to_stderr=True)  # fmt: skip
                said = True
            while not exc.has_input():
                if stop.wait(_INPUT_POLL_S):
                    return None


_INPUT_POLL_S = 1.0  # how often a run waiting for its first input looks for it


def _short_lived(plan: Plan, sql_port: int | None) -> bool:
    """Whether the run's JVM lives through a small catch-up only (no server, schedule or
    always-on query after it), which the client compiler serves best."""
    from streamsmith.runtime.catchup import small_backlog

    return sql_port is None and not plan.schedules and small_backlog(plan) is not None


def _nothing_new(plan: Plan) -> bool:
    """A catch-up whose sources hold nothing its queries have not read ends here, before
    Spark starts (recorded as a run with nothing new), unless a materialized view's table
    is still to be made."""
    from streamsmith.io.lake_paths import is_delta
    from streamsmith.runtime.catchup import nothing_new, record_nothing_new

    if not all(is_delta(view.path) for view in plan.views):
        return False
    reason = nothing_new(plan)
    if reason is None:
        return False
    record_nothing_new(plan, reason)
    say(f"{plan.app.name}: {reason}; no query started", to_stderr=True)
    from streamsmith.runtime.supervisor import QueryOutcome

    for output in plan.outputs:
        say(QueryOutcome(output.query_name, role=output.role).summary())
    return True


def backfill(
    app: AppOrSpec = None,
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
) -> None:
    """Run the app's flows once as batch jobs over all input, into `<root>/backfill`."""
    from streamsmith.runtime import runner
    from streamsmith.runtime.plan import build_plan, check_inputs, check_storage_root

    application, pipeline = spec_for(app, spec, set_, root)
    plan = build_plan(application, pipeline)
    check_storage_root(plan.root)
    check_inputs(plan)
    spark = session(pipeline, application.name)
    report = runner.backfill(spark, plan)
    for table, rows in report.rows.items():
        say(f"{table}: {rows} rows in {plan.root / 'backfill' / table}")
    if plan.views:  # batch queries over the stream's tables: `run` refreshes them
        names = ", ".join(view.name for view in plan.views)
        say(f"not backfilled: materialized views and once flows ({names}): "
            "`streamsmith run` refreshes them", to_stderr=True)  # fmt: skip
