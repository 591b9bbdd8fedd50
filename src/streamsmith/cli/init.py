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
) -> None:
    """Write a small working pipeline: a spec, a Python and a SQL flow, sample input,
    tests and a README with its commands."""
    from streamsmith.scaffold import init_project

    written = init_project(folder, source)
    say(f"wrote {len(written)} files to {folder}:")
    for path in written:
        say(f"  {path.relative_to(folder)}")
    if source == "kafka":
        say(f"next: cd {folder}, then the commands in its README.md (a broker first)")
    else:
        say(f"next: cd {folder} && streamsmith run --trigger available-now && pytest")
