"""``streamsmith table``: a Delta table's history and maintenance, without a JVM.

``convert`` (a Parquet table into Delta) is the one command that starts Spark: only
Delta's own ``CONVERT TO DELTA`` reads the file sink's log. Each other command reads or
writes the table's transaction log through delta-rs (the
``deltalake`` package), so it answers in well under a second where a Spark start takes
several; what it commits (a compaction, a restore) is an ordinary Delta version that
Spark readers and a running stream's next batch take as they take any other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from streamsmith.cli.common import (
    AppOrSpec,
    Format,
    Root,
    Sets,
    SpecFiles,
    check_format,
    print_rows,
    say,
    spec_for,
    storage_root,
)
from streamsmith.errors import UserError
from streamsmith.object_store import local_only, storage_options

table_cli = typer.Typer(
    rich_markup_mode="markdown",
    help="A Delta lake table: its history, compaction, vacuum and restore; converting a "
    "Parquet table.",
    no_args_is_help=True,
)
Table = Annotated[
    str,
    typer.Argument(help="The lake table, named as `query` names it (under <root>/tables)."),
]
# Delta's own default: files a version stopped using stay 7 days, for readers still on it.
DEFAULT_RETAIN_HOURS = 168


def _delta_path(table: str, root: str | None) -> Path:
    """The folder of the Delta table ``table`` under the storage root."""
    from streamsmith.io.lake_paths import is_delta, lake_table

    path = lake_table(storage_root(root), table)
    if not is_delta(path):
        raise UserError(
            f"{path} holds a Parquet table, not a Delta table: write it with format: delta"
        )
    return path


def _delta(table: str, root: str | None) -> Any:
    from deltalake import DeltaTable

    path = _delta_path(table, root)
    return DeltaTable(str(path), storage_options=storage_options(path))


@table_cli.command("history")
def history(
    table: Table,
    root: Root = None,
    fmt: Format = "table",
    details: Annotated[
        bool,
        typer.Option(
            "--details", help="Also each version's parameters (a MERGE's predicates) and metrics."
        ),
    ] = False,
) -> None:
    """Every version of the table, newest first, one line each: when, which operation,
    the rows it was given and what it changed (`+inserted ~updated -deleted`), the query
    that wrote it and the columns it added or changed (schema evolution). `--details`,
    and `--format json` always, add the operation's parameters and metrics."""
    from streamsmith.io.delta_log import commit_infos, commit_writers, rows_in_out, schema_changes
    from streamsmith.io.delta_marks import marked_batch
    from streamsmith.io.lake_paths import CHECKPOINTS_DIR
    from streamsmith.runtime.checkpoint_files import query_names_by_id

    check_format(fmt)
    path = _delta_path(table, root)
    entries = list(commit_infos(path))
    versions = [int(e["version"]) for e in entries if "version" in e]
    changes = schema_changes(path, versions)
    writers = commit_writers(path, versions)
    for entry in entries:  # a foreachBatch write's mark names its query (io.delta_marks)
        mark = marked_batch(entry.get("userMetadata"))
        if mark is not None:
            writers[int(entry["version"])] = mark[0]
    queries = query_names_by_id(storage_root(root) / CHECKPOINTS_DIR) if writers else {}
    details = details or fmt == "json"
    rows = []
    for entry in entries:
        version = entry.get("version", -1)
        metrics = entry.get("operationMetrics") or {}
        rows_in, rows_out = rows_in_out(metrics)
        writer = writers.get(version, "")
        by = writer.split(":", 2)[2] if writer.startswith("streamsmith:") else writer
        row = [entry.get("version"), _when(entry.get("timestamp")), entry.get("operation"),
               rows_in, rows_out, queries.get(by, by), changes.get(version, "")]  # fmt: skip
        parameters = entry.get("operationParameters") or {}
        if fmt == "json":
            row += [parameters, metrics]
        elif details:
            row += [json.dumps(parameters, sort_keys=True), json.dumps(metrics, sort_keys=True)]
        rows.append(row)
    columns = ["version", "timestamp", "operation", "rows_in", "rows_out", "by", "schema"]
    print_rows(rows, columns + ["parameters", "metrics"] * details, table, fmt)


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
    older than that ends. Files of versions a stream reading the table (a checkpoint
    under the root) has not read stay, as in the scheduled vacuum."""
    from deltalake.exceptions import DeltaError

    from streamsmith.runtime.maintenance import vacuum as vacuum_table

    path = _delta_path(table, root)
    try:
        report = vacuum_table(path, storage_root(root), retain_hours, dry_run=dry_run, enforce=True)
    except DeltaError as exc:  # delta-rs refuses a retention shorter than the table's
        raise UserError(f"vacuum {table}: {exc}") from None
    verb = "would delete" if dry_run else "deleted"
    say(f"{table}: {verb} {len(report.done.files)} files unused for {retain_hours} hours"
        f"{report.notes}")  # fmt: skip
    for name in report.done.files if dry_run else []:
        say(f"  {name}")


@table_cli.command("maintain")
def maintain(
    app: AppOrSpec = None,
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
    tables: Annotated[
        list[str] | None,
        typer.Option("--table", help="Only this table (repeatable); default: every one."),
    ] = None,
) -> None:
    """Run the spec's `maintenance` now: OPTIMIZE and VACUUM of each Delta table it
    covers, whatever their schedule, with the guards of a scheduled run (retain written
    into the table; files a stream has not read kept), each recorded in the event log."""
    from streamsmith.monitor.eventlog import EventLog
    from streamsmith.runtime.maintenance import failed, maintain
    from streamsmith.runtime.plan import build_plan

    application, pipeline = spec_for(app, spec, set_, root)
    plan = build_plan(application, pipeline)
    tasks = [task for flow in plan.flows for task in flow.maintenance]
    unknown = sorted(set(tables or ()) - {task.table for task in tasks})
    if unknown:
        covered = ", ".join(sorted(task.table for task in tasks)) or "none"
        raise UserError(
            f"no maintenance declared for table(s) {', '.join(unknown)} (tables with "
            f"maintenance: {covered}): add a maintenance block to the flow or the pipeline"
        )
    log = EventLog(plan.root, pipeline.app)
    events = []
    for task in tasks:
        if tables and task.table not in tables:
            continue
        done = maintain(task, task.operations(), plan.root, log.write, "now")
        if not done:
            say(f"{task.table}: not written yet, nothing to maintain")
        for event in done:
            say(f"{task.table}: {event['operation']}: {event['message']}")
        events += done
    problems = failed(events)
    if problems:
        raise UserError("; ".join(problems))


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


@table_cli.command("convert")
def convert(table: Table, root: Root = None) -> None:
    """Turn a Parquet table an earlier streamsmith wrote into a Delta table, in place:
    only files of committed batches enter it. Stop the pipeline first; then set
    `format: delta` on the flow's sink and run: its checkpoint resumes where it was."""
    from streamsmith.config import SparkSpec
    from streamsmith.io.delta_convert import convert_to_delta, record_streamed_batch
    from streamsmith.io.delta_marks import checkpoint_query_id
    from streamsmith.io.lake_paths import lake_table
    from streamsmith.spark.session import build_session

    lake = local_only(storage_root(root), "table convert (of a Parquet table)")
    path = lake_table(lake, table)
    writers = _checkpoints_writing(lake, path)
    if len(writers) > 1:
        listed = ", ".join(str(w) for w in writers)
        raise UserError(f"{table}: several checkpoints write it ({listed}); remove the stale ones")
    spark = build_session(SparkSpec(), "streamsmith-table-convert")
    converted = convert_to_delta(spark, path)
    query_id = checkpoint_query_id(writers[0]) if writers else None
    if query_id is not None and converted.last_batch is not None:
        record_streamed_batch(spark, path, query_id, converted.last_batch)
    columns = ", ".join(converted.partition_by)
    parts = f", partitioned by {columns}" if columns else ""
    resumes = (
        f"; its stream (checkpoint {writers[0]}) resumes after batch {converted.last_batch} "
        "once its sink says format: delta"
        if query_id is not None and converted.last_batch is not None
        else ""
    )
    say(f"{table}: a Delta table of {converted.files} files{parts}{resumes}")


def _checkpoints_writing(lake: Path, path: Path) -> list[Path]:
    """The checkpoints under the storage root whose query's sink is the table at ``path``."""
    from streamsmith.io.lake_paths import CHECKPOINTS_DIR
    from streamsmith.runtime.checkpoints import FINGERPRINT_FILE, stored_fingerprint

    found = []
    for fingerprint in sorted((lake / CHECKPOINTS_DIR).glob(f"*/*/{FINGERPRINT_FILE}")):
        stored = stored_fingerprint(fingerprint.parent)
        if stored is not None and stored.get("sink", {}).get("target") == str(path):
            found.append(fingerprint.parent)
    return found


def _when(milliseconds: Any) -> str | None:
    from datetime import UTC, datetime

    if milliseconds is None:
        return None
    return datetime.fromtimestamp(int(milliseconds) / 1000, UTC).isoformat(timespec="seconds")
