"""The command line run in the test's own process and its shared Spark session, as
``streamsmith.cli.main`` runs it: a user's mistake is exit code 2 and one ``error:``
line. For commands whose own process is not what a test is about: a cold JVM per
command is most of what a subprocess test costs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from streamsmith.cli import cli
from streamsmith.errors import UserError
from streamsmith.runtime.runner import PipelineError


@dataclass(frozen=True)
class Ran:
    """What a command printed and how it ended, as ``subprocess.run`` reports it."""

    returncode: int
    stdout: str
    stderr: str


def invoke(*args: str) -> Ran:
    """``streamsmith ARGS``; an error other than a user's mistake (exit 2) or a failed
    run (exit 1) is raised as is."""
    result = CliRunner().invoke(cli, list(args))
    for kind, code in ((UserError, 2), (PipelineError, 1)):
        if isinstance(result.exception, kind):
            return Ran(code, result.stdout, f"{result.stderr}error: {result.exception}\n")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Ran(result.exit_code, result.stdout, result.stderr)


def in_project(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """The test's commands run in ``folder``, as a user's would in their project's: no
    storage root from the environment, the spec found from the current folder."""
    monkeypatch.delenv("STREAMSMITH_ROOT", raising=False)
    monkeypatch.chdir(folder)
