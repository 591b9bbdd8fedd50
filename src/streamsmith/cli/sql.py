"""SQL over the lake: ``query`` (locally or against a server) and ``sql-server``."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from streamsmith.cli.common import (
    Format,
    Root,
    Sets,
    SpecFiles,
    check_format,
    print_rows,
    reading_target,
    say,
    session,
    spec_for,
    stop_on_signals,
)
from streamsmith.errors import UserError

AppOpt = Annotated[
    str | None,
    typer.Option(
        "--app",
        help="Take storage root and Spark conf from this app's spec, or your pipeline's "
        "spec file (default: ./streamsmith.yml if there is one).",
    ),
]


def query(
    sql: str,
    app: AppOpt = None,
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
    fmt: Format = "table",
    max_rows: Annotated[
        int, typer.Option("--max-rows", help="Print at most this many rows.")
    ] = 1000,
    server: Annotated[
        str | None,
        typer.Option(
            "--server",
            help="HOST:PORT of `streamsmith sql-server` or `run --sql-port`: query a running "
            "app, memory tables included.",
        ),
    ] = None,
) -> None:
    """Run Spark SQL over every lake table (a view each) and the event log
    (``streamsmith_events``)."""
    check_format(fmt)
    if server is not None:
        from streamsmith.runtime.sql_server import beeline_query

        columns, values = beeline_query(server, sql)
        print_rows(values[:max_rows], columns, None, fmt)
        return
    _, pipeline = spec_for(reading_target(app), spec, set_, root)
    if not pipeline.root.is_dir():
        raise UserError(
            f"storage root {pipeline.root} does not exist: run a pipeline first or pass --root"
        )
    spark = session(pipeline, "query")
    rows, columns = run_sql(spark, pipeline.root, sql, max_rows)
    print_rows(rows, columns, None, fmt)


def sql_server(
    app: AppOpt = None,
    root: Root = None,
    port: Annotated[int, typer.Option("--port")] = 10000,
    refresh: Annotated[
        float, typer.Option("--refresh-seconds", help="Re-register new lake tables this often.")
    ] = 30.0,
) -> None:
    """Serve the lake tables over JDBC/ODBC (Spark's Thrift server) on 127.0.0.1 until
    stopped; connect with beeline, a BI tool, or `streamsmith query --server`."""
    _, pipeline = spec_for(reading_target(app), root=root)
    spark = session(pipeline, "sql-server")
    server = serve_sql(spark, pipeline.root, port)
    stop = threading.Event()
    try:
        with stop_on_signals(stop):
            while not stop.wait(refresh):
                register_views(spark, pipeline.root)
    finally:
        server.stop()


def register_views(spark: Any, root: Path) -> None:
    """Every lake table, and the event log as ``streamsmith_events``."""
    from streamsmith.io.lake import register_lake_views
    from streamsmith.monitor.eventlog import register_event_view

    register_lake_views(spark, root)
    register_event_view(spark, root)


def serve_sql(spark: Any, root: Path, port: int) -> Any:
    """Start the Thrift server over the lake's views; the caller stops it."""
    from streamsmith.runtime.sql_server import start_sql_server

    register_views(spark, root)
    server = start_sql_server(spark, port)
    say(f"serving SQL at {server.jdbc_url} (e.g. streamsmith query --server 127.0.0.1:{port} "
        '"SHOW TABLES")', to_stderr=True)  # fmt: skip
    return server


def run_sql(spark: Any, root: Path, sql: str, max_rows: int) -> tuple[list[Any], list[str]]:
    """Run SQL over the lake's views; SQL errors become UserErrors naming the problem."""
    from pyspark.errors import AnalysisException, ParseException

    register_views(spark, root)
    try:
        frame = spark.sql(sql)
        rows = frame.limit(max_rows).collect()
    except (AnalysisException, ParseException) as exc:
        message = str(exc).splitlines()[0]
        raise UserError(f"query failed: {message}") from None
    return rows, frame.columns
