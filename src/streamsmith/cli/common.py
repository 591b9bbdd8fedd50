"""What every command group shares: options, output, spec loading, Spark, signals.

Imports stay light (no pyspark, no runtime, not even the spec's models: pydantic) so
that ``streamsmith --help`` and ``query`` start fast; the commands import what they run
inside their functions.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from streamsmith import console
from streamsmith.defaults import (
    DEFAULT_STORAGE_ROOT,
    STORAGE_ROOT_ENV,
    absolute_root,
    find_spec,
    spec_here,
)
from streamsmith.errors import UserError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamsmith.config import PipelineSpec, Trigger
    from streamsmith.runtime.app import App

out = Console()
err = Console(stderr=True)


def say(text: str, *, to_stderr: bool = False) -> None:
    """Print plain text: no markup, highlighting or wrapping of paths and SQL."""
    console.say(err if to_stderr else out, text)


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
    typer.Option(
        "--trigger",
        help="available-now | once | interval=DURATION | real-time[=DURATION], e.g. interval=10s",
    ),
]
AppOrSpec = Annotated[
    str | None,
    typer.Argument(
        help="A reference app's name, or your pipeline's spec file or folder "
        "(default: ./streamsmith.yml).",
        show_default=False,
    ),
]
Format = Annotated[str, typer.Option("--format", help="table | csv | json")]
PortOpt = Annotated[int | None, typer.Option("--port", help="Loopback port (default: free).")]


def spec_for(
    app_name: str | None,
    files: list[Path] | None = None,
    sets: list[str] | None = None,
    root: str | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    keep_inferred: bool = True,
) -> tuple[App, PipelineSpec]:
    """The app (a reference app by name, or a pipeline of your own by its spec file or
    folder; none: ``./streamsmith.yml``) and its spec as the command line layers it; a
    schema inferred from a pipeline's input is stored unless ``keep_inferred`` is false."""
    from streamsmith.config import load_spec
    from streamsmith.pipelines import load_pipeline

    path = find_spec(app_name)
    if path is not None:
        return load_pipeline(
            path,
            files or (),
            sets or (),
            overrides=overrides,
            storage_root=root,
            keep_inferred=keep_inferred,
        )
    assert app_name is not None  # find_spec found no spec file only for a name
    from streamsmith.apps import get_app  # the reference apps, imported only when named

    app = get_app(app_name)
    spec = load_spec(
        app.default_spec, files or (), sets or (), overrides=overrides, storage_root=root
    )
    if spec.app != app.name:
        raise UserError(f"the spec is for app {spec.app!r}, but the command names {app.name!r}")
    return app, spec


def reading_target(app: str | None) -> str | None:
    """What a read-only command (query, sql-server, status) reads when it names no app:
    the pipeline of ``./streamsmith.yml`` (or the SDP project here) when there is one,
    else the default storage
    root (by the cloudtrail app's spec, whose Spark settings are the defaults)."""
    if app is not None or spec_here() is not None:
        return app
    return "cloudtrail"


def storage_root(root: str | None) -> Path:
    """``--root``, else ``$STREAMSMITH_ROOT``, else the storage root of ``./streamsmith.yml``
    (or of the SDP project here) when there is one (a pipeline's own folder), else the
    default; made absolute."""
    given = root or os.environ.get(STORAGE_ROOT_ENV)
    here = spec_here() if given is None else None
    if here is not None and here.suffix != ".py":
        from streamsmith.config import load_spec_file

        return load_spec_file(here).root
    return absolute_root(given or DEFAULT_STORAGE_ROOT)


def trigger(text: str | None) -> Trigger | None:
    """``--trigger`` parsed; None leaves the spec's trigger."""
    if text is None:
        return None
    from streamsmith.config import parse_trigger

    try:
        return parse_trigger(text)
    except ValueError as exc:
        raise UserError(f"--trigger: {exc}") from None


def check_format(fmt: str) -> None:
    """``--format`` must be one :func:`print_rows` knows."""
    if fmt not in ("table", "csv", "json"):
        raise UserError(f"--format {fmt!r}: use table, csv or json")


def session(spec: PipelineSpec, name: str, *, client_compiler: bool = False) -> SparkSession:
    """A Spark session for the spec (its warehouse under the storage root: see
    ``PipelineSpec.session_spark``), with a spinner on stderr while it starts
    (``client_compiler``: see ``spark.session.default_conf``)."""
    from streamsmith.spark.session import build_session

    with err.status(f"starting Spark ({spec.spark.master})"):
        return build_session(
            spec.session_spark, f"streamsmith-{name}", client_compiler=client_compiler
        )


@contextmanager
def stop_on_signals(
    stop: threading.Event, announce: str | None = "stopping after the current batch"
) -> Iterator[None]:
    """SIGINT/SIGTERM ask for a graceful stop (said on stderr, unless ``announce`` is
    None); a second signal aborts at once."""

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        if announce is not None:
            say(f"{signal.Signals(signum).name}: {announce}", to_stderr=True)
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def print_rows(rows: list[Any], columns: list[str], title: str | None, fmt: str) -> None:
    """Rows as a table (one record after another when too wide for the terminal), CSV or
    JSON lines (one row per line) on stdout."""
    if fmt == "json":
        import json

        for row in rows:
            record = (
                row.asDict(recursive=True)
                if hasattr(row, "asDict")
                else dict(zip(columns, row, strict=True))
            )
            say(json.dumps(record, default=str))
        return
    if fmt == "csv":
        import csv

        writer = csv.writer(sys.stdout, lineterminator="\n")  # as the other formats end lines
        # On a terminal, control characters in the data (ESC, OSC, BEL, CR) would move the
        # cursor or recolour it: escaped there, kept as they are in a file or a pipe.
        cell = console.printable if sys.stdout.isatty() else str
        writer.writerow([cell(column) for column in columns])
        writer.writerows([["" if v is None else cell(str(v)) for v in row] for row in rows])
        return
    out.print(console.rows_view(columns, rows, title, out.width))
