"""Watching running apps: ``status`` from the event log and the live ``dashboard``."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated

import typer

from streamsmith.cli.common import (
    Format,
    Root,
    check_format,
    print_rows,
    say,
    spec_for,
    stop_on_signals,
    storage_root,
)
from streamsmith.errors import UserError


def status(
    app: Annotated[
        str | None,
        typer.Argument(help="Only this app's queries, or your pipeline's spec file or folder."),
    ] = None,
    root: Root = None,
    fmt: Format = "table",
) -> None:
    """One row per query from the event log: state, last batch, rates, lag, watermark
    delay, state rows, quarantined and late rows, restarts, last error."""
    from streamsmith.monitor.eventlog import read_events
    from streamsmith.monitor.status import query_statuses

    check_format(fmt)
    storage, app = _status_scope(app, root)
    statuses = query_statuses(read_events(storage, app))
    if not statuses:
        raise UserError(
            f"no runs recorded under {storage}"
            + (f" for app {app!r}" if app else "")
            + ": start one with `streamsmith run`, or pass --root"
        )
    records = [s.as_dict() for s in statuses]
    if fmt != "json":  # one cell: each expectation's failed of judged records
        for record in records:
            record["expectations"] = ", ".join(
                f"{name} {n['failed']}/{n['passed'] + n['failed']} failed"
                for name, n in record["expectations"].items()
            )
    rows = [list(record.values()) for record in records]
    print_rows(rows, list(statuses[0].as_dict()), f"queries under {storage}", fmt)


def _status_scope(app: str | None, root: str | None) -> tuple[Path, str | None]:
    """The storage root and app whose events ``status`` reads: a pipeline spec (named, or
    ``./streamsmith.yml``) gives both; else ``--root`` and the app's name."""
    from streamsmith.pipelines import SPEC_FILE

    named_spec = app is not None and (Path(app).is_dir() or app.endswith((".yml", ".yaml")))
    if named_spec or (app is None and root is None and Path(SPEC_FILE).is_file()):
        _, spec = spec_for(app, root=root)
        return spec.root, spec.app
    return storage_root(root), app


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

    server = Dashboard(storage_root(root), host, port, token).start()
    say(f"dashboard at {server.url} (Ctrl-C stops it)", to_stderr=True)
    stop = threading.Event()
    try:
        with stop_on_signals(stop):
            stop.wait()
    finally:
        server.stop()
