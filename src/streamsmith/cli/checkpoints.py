"""An app's checkpoints: ``checkpoint show`` and ``check-upgrade``, which judges the
current code against them."""

from __future__ import annotations

from typing import Annotated

import typer

from streamsmith.cli.common import AppOrSpec, Root, Sets, SpecFiles, say, session, spec_for
from streamsmith.errors import UserError

checkpoint_cli = typer.Typer(
    rich_markup_mode="markdown", help="Inspect an app's checkpoints.", no_args_is_help=True
)


@checkpoint_cli.command("show")
def checkpoint_show(
    app: AppOrSpec = None,
    flow: Annotated[str | None, typer.Argument(help="Only this flow's queries.")] = None,
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
    state_rows: Annotated[
        int,
        typer.Option(
            "--state-rows",
            min=0,
            help="Also print the first N rows of each state store: this starts Spark.",
        ),
    ] = 0,
) -> None:
    """Per query: its id, last planned and committed batch, each source's offsets, and
    its state stores (operator, stores, partitions, batches, rows at the last batch the
    event log recorded), read from the checkpoint's files without Spark."""
    import json

    from streamsmith.monitor.eventlog import read_events
    from streamsmith.runtime.checkpoint_files import read_checkpoint, state_samples
    from streamsmith.runtime.plan import build_plan

    application, pipeline = spec_for(app, spec, set_, root)
    plan = build_plan(application, pipeline)
    flows = [f for f in plan.flows if flow is None or f.name == flow]
    if not flows:
        raise UserError(
            f"app {application.name} has no flow {flow!r}: see `streamsmith dry-run {app or ''}`"
        )
    events = read_events(plan.root, application.name)
    views = [
        read_checkpoint(output.query_name, output.checkpoint, events)
        for f in flows
        for output in f.outputs
    ]
    spark = (
        session(pipeline, "checkpoint") if state_rows and any(v.operators for v in views) else None
    )
    for view in views:
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
        samples = state_samples(spark, view, state_rows) if spark is not None else {}
        for operator in view.operators:
            rows = (
                f"{operator.rows} rows at batch {operator.rows_batch}"
                if operator.rows is not None
                else "rows not in the event log"
            )
            say(f"  state: operator {operator.operator_id} {operator.name} "
                f"store {', '.join(operator.stores)}, {operator.partitions} partitions, "
                f"batches {view.first_commit}..{view.last_commit}, {rows}")  # fmt: skip
            for part in operator.parts:
                for row in samples.get((operator.operator_id, part), []):
                    say(f"    {part}: {json.dumps(row, default=str)}")


def check_upgrade(
    app: AppOrSpec = None,
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
) -> None:
    """Say per query whether the current code resumes its checkpoint safely or needs
    --full-refresh, by Spark's rules for changes between restarts; exits 1 if any does."""
    from streamsmith.runtime import checkpoints
    from streamsmith.runtime.plan import build_plan

    application, pipeline = spec_for(app, spec, set_, root)
    plan = build_plan(application, pipeline)
    spark = session(pipeline, "check-upgrade")
    verdicts = checkpoints.check_upgrade(spark, plan)
    for verdict in verdicts:
        say(f"{verdict.query}: {verdict.summary}")
    if any(not verdict.resumable for verdict in verdicts):
        raise typer.Exit(1)
