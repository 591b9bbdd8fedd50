"""The ``streamsmith`` command: parses arguments and calls plain functions.

User errors (unknown app, bad spec, missing input, unwritable storage) print one line and
exit 2; a failed query exits 1; everything else is a bug and keeps its traceback.

One module per command group; this one assembles them in the order ``--help`` lists
them (commands first, then groups) and holds the entry point.
"""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

# The command line uses no pydantic plugin, and finding them scans every installed
# package's entry points at the first model typer builds (about 20 ms of each command's
# start). A user who wants theirs in a run sets PYDANTIC_DISABLE_PLUGINS=0.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

import typer
import typer.main

from streamsmith.cli import (
    checkpoints,
    demo,
    init,
    jvm,
    monitoring,
    pipeline,
    reports,
    schema,
    services,
    sql,
    table,
)
from streamsmith.cli.common import say
from streamsmith.cli.generate import generate_cli
from streamsmith.errors import UserError

__all__ = ["cli", "main"]

cli = typer.Typer(
    name="streamsmith",
    help="Continuous applications on Spark Structured Streaming: run, backfill, query.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Docstrings wrap at 88 columns; markdown mode joins their lines into sentences that
    # the terminal wraps, instead of breaking where the source did.
    rich_markup_mode="markdown",
)
cli.command("init")(init.init)
cli.command("apps")(pipeline.list_apps)
cli.command("dry-run")(pipeline.dry_run)
cli.command("run")(pipeline.run)
cli.command("backfill")(pipeline.backfill)
cli.command("status")(monitoring.status)
cli.command("check-upgrade")(checkpoints.check_upgrade)
cli.command("dashboard")(monitoring.dashboard)
cli.command("query")(sql.query)
cli.command("sql-server")(sql.sql_server)
cli.command("demo")(demo.demo)
cli.add_typer(generate_cli, name="generate")
cli.add_typer(checkpoints.checkpoint_cli, name="checkpoint")
cli.add_typer(schema.schema_cli, name="schema")
cli.add_typer(table.table_cli, name="table")
cli.add_typer(services.db_cli, name="db")
cli.add_typer(services.broker_cli, name="broker")
cli.add_typer(services.topic_cli, name="topic")
cli.add_typer(services.cluster_cli, name="cluster")
cli.add_typer(reports.report_cli, name="report")
cli.add_typer(reports.train_cli, name="train")
cli.add_typer(jvm.jvm_cli, name="jvm")


def main() -> None:
    """Entry point of the console script."""
    try:
        command_line(sys.argv[1:])()
    except UserError as exc:
        say(f"error: {exc}", to_stderr=True)
        sys.exit(2)
    except Exception as exc:
        from streamsmith.runtime.runner import PipelineError

        if isinstance(exc, PipelineError):
            say(f"error: {exc}", to_stderr=True)
            sys.exit(1)
        raise


def command_line(args: Sequence[str]) -> Callable[[], Any]:
    """The command line for ``args``: when they name a command or group, one holding just
    that one. Typer reads every command's signature to build its parameters (some 20 ms
    for all of them), so ``streamsmith query`` builds only its own; ``--help`` and an
    unknown name get every command."""
    first = args[0] if args else None
    commands = [info for info in cli.registered_commands if info.name == first]
    groups = [info for info in cli.registered_groups if info.name == first]
    if not commands and not groups:
        return cli
    only = copy.copy(cli)
    only.registered_commands, only.registered_groups = commands, groups
    return typer.main.get_group(only)  # a group even of one command: `query SQL` parses
