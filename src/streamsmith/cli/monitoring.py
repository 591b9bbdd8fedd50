"""Watching running apps: ``status`` from the event log and the live ``dashboard``."""

from __future__ import annotations

import os
import shlex
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from streamsmith.cli.common import (
    Format,
    Root,
    check_format,
    out,
    print_rows,
    say,
    spec_for,
    stop_on_signals,
    storage_root,
)
from streamsmith.errors import UserError
from streamsmith.object_store import local_side

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult

    from streamsmith.monitor.status import QueryStatus

TOKEN_ENV = "STREAMSMITH_DASHBOARD_TOKEN"  # the dashboard's token, when no --token-file


def status(
    app: Annotated[
        str | None,
        typer.Argument(help="Only this app's queries, or your pipeline's spec file or folder."),
    ] = None,
    root: Root = None,
    fmt: Format = "table",
    wide: Annotated[
        bool,
        typer.Option("--wide", help="Every field, one table row per query (a wide terminal)."),
    ] = False,
    watch: Annotated[
        float | None,
        typer.Option(
            "--watch",
            metavar="SECONDS",
            min=0.1,
            help="Redraw every SECONDS until Ctrl-C (table format only).",
        ),
    ] = None,
) -> None:
    """Per app, per flow, each query from the event log: state, last batch, input and
    processing rates, lag, restarts, quarantined and late rows, failed expectations and
    the last error of a failed query. Reads files only: no Spark starts."""
    check_format(fmt)
    if watch is not None and fmt != "table":
        raise UserError(f"--watch redraws the table view: leave out --format {fmt}")
    storage, app = _status_scope(app, root)
    if watch is not None:
        _watch(lambda: _status_view(storage, app, wide, required=False), watch)
        return
    if fmt == "table":
        out.print(_status_view(storage, app, wide, required=True), crop=False)
        return
    statuses = _statuses(storage, app, required=True)
    rows = [list(record.values()) for record in _records(statuses, flat=fmt != "json")]
    print_rows(rows, list(statuses[0].as_dict()), f"queries under {storage}", fmt)


def _status_scope(app: str | None, root: str | None) -> tuple[Path, str | None]:
    """The storage root and app whose events ``status`` reads: a pipeline spec (named, or
    ``./streamsmith.yml``) gives both, read without loading the pipeline's code; else
    ``--root`` and the app's name."""
    from streamsmith.config import load_spec_file
    from streamsmith.defaults import find_spec, spec_here

    if app is None and (root is not None or spec_here() is None):
        return storage_root(root), None
    path = find_spec(app)
    if path is None:  # a reference app's name
        return storage_root(root), app
    if path.suffix == ".py":  # its name is in its code
        _, spec = spec_for(str(path), root=root)
    else:
        spec = load_spec_file(path, storage_root=root)
    return spec.root, spec.app


def _statuses(storage: Path, app: str | None, *, required: bool) -> list[QueryStatus]:
    """The queries' statuses from the event log; none recorded is a user error when
    ``required`` (a single look), not while watching for a run to start."""
    from streamsmith.monitor.status_cache import cached_statuses

    statuses = cached_statuses(storage, app)
    if not statuses and required:
        raise UserError(
            f"no runs recorded under {storage}"
            + (f" for app {app!r}" if app else "")
            + ": start one with `streamsmith run`, or pass --root"
        )
    return statuses


def _records(statuses: list[QueryStatus], *, flat: bool) -> list[dict[str, Any]]:
    """Every field of each status; ``flat``: the expectations as one cell, each one's
    failed of judged records."""
    records = [status.as_dict() for status in statuses]
    for record in records if flat else ():
        record["expectations"] = ", ".join(
            f"{name} {n['failed']}/{n['passed'] + n['failed']} failed"
            for name, n in record["expectations"].items()
        )
    return records


def _status_view(storage: Path, app: str | None, wide: bool, *, required: bool) -> RenderableType:
    """The status as the terminal shows it: the compact view at the console's width, or
    with ``wide`` every field in a table as wide as its cells (nothing cut)."""
    from rich.console import Group
    from rich.measure import Measurement
    from rich.text import Text

    from streamsmith.console import rows_table
    from streamsmith.monitor.status_view import compact_lines

    statuses = _statuses(storage, app, required=required)
    where = f"queries under {_shown_path(storage)}"
    if not statuses:
        return Text(f"{where}: no runs recorded yet")
    if wide:
        records = _records(statuses, flat=True)
        table = rows_table(list(records[0]), [list(r.values()) for r in records])
        for column in table.columns:
            column.no_wrap = True
        natural = Measurement.get(out, out.options.update(width=100_000), table).maximum
        return Group(Text(where), _Sized(table, natural))
    lines = [*_wrapped_text(where, out.width), *compact_lines(statuses, out.width)]
    return Text("\n".join(lines), no_wrap=True, overflow="ignore")


class _Sized:
    """A renderable printed at its natural width, wider than the terminal if need be, so
    no cell is cut (``--wide``: for a wide terminal, or ``less -S``)."""

    def __init__(self, renderable: RenderableType, width: int) -> None:
        self.renderable, self.width = renderable, width

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from console.render(self.renderable, options.update(width=self.width))


def _shown_path(path: Path) -> str:
    """``path`` relative to the working folder when under it: shorter on screen."""
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def _wrapped_text(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width, break_on_hyphens=False, subsequent_indent="  ")


def _watch(view: Callable[[], RenderableType], seconds: float) -> None:
    """Redraw ``view`` every ``seconds`` (in place on a terminal, one frame after the
    other into a pipe or file) until SIGINT or SIGTERM."""
    from datetime import datetime

    stop = threading.Event()
    with stop_on_signals(stop, announce=None):
        while not stop.is_set():
            frame = view()
            if out.is_terminal:
                out.clear()
            header = f"every {seconds:g}s, {datetime.now():%H:%M:%S} (Ctrl-C stops)"
            say(header)
            out.print(frame, crop=False)
            if not out.is_terminal:
                say("")
            out.file.flush()
            stop.wait(seconds)


def dashboard(
    root: Root = None,
    port: Annotated[int, typer.Option("--port")] = 8050,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            help="A file only you can read holding the page's token (16 characters or "
            f"more, random); else ${TOKEN_ENV}; else one is generated. Never on the "
            "command line, which every local user sees in `ps`.",
        ),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            help="A name the page may be reached by besides loopback names (repeatable).",
        ),
    ] = None,
) -> None:
    """Serve the live monitoring page over the event log until stopped: per query,
    input vs processing rate, batch duration, watermark delay, state rows, lag,
    quarantined and late rows, alerts and failures. Its address with the token goes to
    <root>/dashboard.url (readable by you only), never to the terminal."""
    from streamsmith.processes import write_new_file
    from streamsmith.web.server import Dashboard

    data_root = local_side(storage_root(root))
    token = dashboard_token(token_file)
    server = Dashboard(data_root, host, port, token, allow_host or ()).start()
    link = data_root / "dashboard.url"
    data_root.mkdir(parents=True, exist_ok=True)
    link.unlink(missing_ok=True)
    write_new_file(link, f"{server.url}\n".encode())
    say(
        f"dashboard at {server.address}: open the address with its token from {link} "
        f'(e.g. xdg-open "$(cat {shlex.quote(str(link))})"); Ctrl-C stops it',
        to_stderr=True,
    )
    stop = threading.Event()
    try:
        with stop_on_signals(stop):
            stop.wait()
    finally:
        server.stop()
        link.unlink(missing_ok=True)


def dashboard_token(token_file: Path | None) -> str | None:
    """The dashboard's token from ``--token-file`` (refused when others may read it),
    else from ``$STREAMSMITH_DASHBOARD_TOKEN``; None: the dashboard generates one."""
    if token_file is None:
        return os.environ.get(TOKEN_ENV) or None
    from streamsmith.processes import read_own_file

    try:
        mode = token_file.stat().st_mode
        text = read_own_file(token_file).decode().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--token-file {token_file}: cannot read it ({exc})") from None
    if mode & 0o077:
        raise UserError(
            f"--token-file {token_file}: the token is readable by others (mode "
            f"{mode & 0o777:o}): chmod 600 {token_file}"
        )
    return text
