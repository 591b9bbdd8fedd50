"""``streamsmith table``: a Delta table's history and maintenance, without a JVM.

Each command reads or writes the table's transaction log through delta-rs (the
``deltalake`` package), so it answers in well under a second where a Spark start takes
several; what it commits (a compaction, a restore) is an ordinary Delta version that
Spark readers and a running stream's next batch take as they take any other.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from streamsmith.cli.common import Format, Root, check_format, print_rows, say, storage_root
from streamsmith.errors import UserError

table_cli = typer.Typer(
    rich_markup_mode="markdown",
    help="A Delta lake table: its history, compaction, vacuum and restore.",
    no_args_is_help=True,
)
Table = Annotated[str, typer.Argument(help="The lake table (its name under <root>/tables).")]
# Delta's own default: files a version stopped using stay 7 days, for readers still on it.
DEFAULT_RETAIN_HOURS = 168


def _delta(table: str, root: str | None) -> Any:
    from deltalake import DeltaTable

    from streamsmith.io.lake_paths import is_delta, is_table, table_path

    path = table_path(storage_root(root), table)
    if not is_delta(path):
        kind = "a Parquet table" if is_table(path) else "no table"
        raise UserError(f"{path} holds {kind}, not a Delta table: write it with format: delta")
    return DeltaTable(str(path))


@table_cli.command("history")
def history(table: Table, root: Root = None, fmt: Format = "table") -> None:
    """Every version of the table, newest first: when, which operation, with what."""
    check_format(fmt)
    rows = [
        [
            entry.get("version"),
            _when(entry.get("timestamp")),
            entry.get("operation"),
            json.dumps(entry.get("operationParameters") or {}, sort_keys=True),
            json.dumps(entry.get("operationMetrics") or {}, sort_keys=True),
        ]
        for entry in _delta(table, root).history()
    ]
    print_rows(rows, ["version", "timestamp", "operation", "parameters", "metrics"], table, fmt)


@table_cli.command("optimize")
def optimize(table: Table, root: Root = None) -> None:
    """Compact small files into larger ones (a new version; readers of older versions
    keep theirs until `vacuum`)."""
    metrics = _delta(table, root).optimize.compact()
    say(
        f"{table}: {metrics.get('numFilesRemoved', 0)} files compacted into "
        f"{metrics.get('numFilesAdded', 0)}"
    )


@table_cli.command("vacuum")
def vacuum(
    table: Table,
    root: Root = None,
    retain_hours: Annotated[
        int,
        typer.Option(
            "--retain-hours",
            help="Keep files a version newer than this many hours ago still uses; Delta "
            "refuses less than the table's delta.deletedFileRetentionDuration (7 days).",
        ),
    ] = DEFAULT_RETAIN_HOURS,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only list the files.")] = False,
) -> None:
    """Delete the files no version within the retention uses: time travel to versions
    older than that ends, and a stream reading the table must not be further behind."""
    from deltalake.exceptions import DeltaError

    try:
        removed = _delta(table, root).vacuum(
            retention_hours=retain_hours, dry_run=dry_run, enforce_retention_duration=True
        )
    except DeltaError as exc:  # delta-rs refuses a retention shorter than the table's
        raise UserError(f"vacuum {table}: {exc}") from None
    verb = "would delete" if dry_run else "deleted"
    say(f"{table}: {verb} {len(removed)} files unused for {retain_hours} hours")
    for path in removed if dry_run else []:
        say(f"  {path}")


@table_cli.command("restore")
def restore(
    table: Table,
    version: Annotated[int, typer.Option("--version", help="The version to go back to.")],
    root: Root = None,
) -> None:
    """Make the table's content that of an earlier version (itself a new version: the
    history keeps what came between)."""
    delta = _delta(table, root)
    metrics = delta.restore(version)
    say(f"{table}: restored version {version} as version {delta.version()} ({metrics})")


def _when(milliseconds: Any) -> str | None:
    from datetime import UTC, datetime

    if milliseconds is None:
        return None
    return datetime.fromtimestamp(int(milliseconds) / 1000, UTC).isoformat(timespec="seconds")
