"""``streamsmith init``: scaffold a pipeline project of your own."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from streamsmith.cli.common import say


def init(
    folder: Annotated[Path, typer.Argument(help="A new (or empty) folder for the project.")],
    source: Annotated[
        str,
        typer.Option("--source", help="Where the records come from: files or kafka."),
    ] = "files",
    sdp: Annotated[
        bool,
        typer.Option(
            "--sdp",
            help="A Spark Declarative Pipelines project, as spark-pipelines init makes it,"
            " with tests.",
        ),
    ] = False,
) -> None:
    """Write a small working pipeline: a spec, a Python and a SQL flow, sample input,
    tests and a README with its commands (with --sdp: the project spark-pipelines init
    makes, tests and a README)."""
    from streamsmith.scaffold import init_project, init_sdp_project

    written = init_sdp_project(folder) if sdp else init_project(folder, source)
    say(f"wrote {len(written)} files to {folder}:")
    for path in written:
        say(f"  {path.relative_to(folder)}")
    if sdp:
        say(f"next: cd {folder} && streamsmith run --trigger available-now && pytest")
    elif source == "kafka":
        say(f"next: cd {folder}, then the commands in its README.md (a broker first)")
    else:
        say(f"next: cd {folder} && streamsmith run --trigger available-now && pytest")
