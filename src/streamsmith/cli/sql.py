"""SQL over the lake: ``query`` (locally or against a server) and ``sql-server``."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

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
from streamsmith.defaults import (
    SESSION_TIME_ZONE,
    SPEC_FILE,
    default_root,
    sdp_spec_in,
    spec_here,
)
from streamsmith.errors import UserError

if TYPE_CHECKING:
    from streamsmith.config import ConfValue, PipelineSpec

AppOpt = Annotated[
    str | None,
    typer.Option(
        "--app",
        help="Take storage root and Spark conf from this app's spec, or your pipeline's "
        "spec file (default: ./streamsmith.yml if there is one).",
    ),
]


EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        help="auto: DuckDB over the committed files when it gives Spark's answer, else "
        "Spark (one line on stderr says why); duckdb: fail instead; spark: always Spark.",
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
    engine: EngineOpt = "auto",
) -> None:
    """Run Spark SQL over every lake table (a view each) and the event log
    (``streamsmith_events``): answered in-process by DuckDB when it gives Spark's answer,
    else by Spark."""
    check_format(fmt)
    if engine not in ENGINES:
        raise UserError(f"--engine {engine!r}: use {', '.join(ENGINES)}")
    if server is not None:
        if engine == "duckdb":
            raise UserError("--engine duckdb cannot answer through --server: drop one of them")
        if engine == "auto":
            say("on Spark: --server names a running Spark SQL server", to_stderr=True)
        from streamsmith.runtime.sql_server import beeline_query

        columns, values = beeline_query(server, sql)
        print_rows(values[:max_rows], columns, None, fmt)
        return
    reading = reading_spec(app, spec, set_, root)
    if reading is not None:
        _check_lake_tables(sql, reading)
    if engine != "spark":
        data_root, conf = _root_and_conf(reading, root)
        answered = fast_answer(sql, data_root, conf, max_rows, required=engine == "duckdb")
        if answered is not None:
            print_rows(*answered, None, fmt)
            return
    _, pipeline = spec_for(reading_target(app), spec, set_, root)
    _check_root(pipeline.root)
    spark = session(pipeline, "query")
    rows, columns = run_sql(spark, pipeline.root, sql, max_rows)
    print_rows(rows, columns, None, fmt)


ENGINES = ("auto", "duckdb", "spark")


def fast_answer(
    sql: str,
    data_root: Path,
    conf: Mapping[str, ConfValue],
    max_rows: int,
    *,
    required: bool,
) -> tuple[list[Any], list[str]] | None:
    """The rows and columns of ``sql`` over the lake at ``data_root`` from DuckDB, or None
    (after one line on stderr) when only Spark can answer it; ``required``: a UserError
    instead."""
    from streamsmith.read.engine import answer
    from streamsmith.read.errors import NotOnFastPath

    _check_root(data_root)
    try:
        return answer(
            data_root,
            sql,
            max_rows=max_rows,
            time_zone=str(conf.get(TIME_ZONE_KEY, SESSION_TIME_ZONE)),
            ansi=str(conf.get(ANSI_KEY, "true")).lower() == "true",
        )
    except NotOnFastPath as why:
        if required:
            raise UserError(f"--engine duckdb cannot answer this query: {why}") from None
        say(f"on Spark: {why}", to_stderr=True)
        return None


TIME_ZONE_KEY = "spark.sql.session.timeZone"
ANSI_KEY = "spark.sql.ansi.enabled"


# What a read naming no app reads by: the default storage root, and the cloudtrail app's
# Spark conf, which is empty (tests/unit/test_read.py checks it).
DEFAULT_READING_SPEC: Mapping[str, Any] = {"app": "cloudtrail", "sources": {}, "flows": {}}
DEFAULT_READING_CONF: Mapping[str, ConfValue] = {}


def reading_conf(
    app: str | None, files: list[Path] | None, sets: list[str] | None, root: str | None
) -> tuple[Path, Mapping[str, ConfValue]]:
    """Storage root and Spark conf of what a read names (see :func:`reading_spec`)."""
    return _root_and_conf(reading_spec(app, files, sets, root), root)


def _root_and_conf(
    spec: PipelineSpec | None, root: str | None
) -> tuple[Path, Mapping[str, ConfValue]]:
    if spec is None:
        return default_root(root), DEFAULT_READING_CONF
    return spec.root, spec.spark.conf


def reading_spec(
    app: str | None, files: list[Path] | None, sets: list[str] | None, root: str | None
) -> PipelineSpec | None:
    """The spec of what a read names, without importing any pipeline when that is
    possible: None when it names none (the default spec, whose models are not worth
    building: pydantic), a YAML spec file's; an app by name or a Python pipeline file
    is loaded (its spec may set the conf)."""
    yaml_file = _yaml_spec(app)
    if yaml_file is None and app is None and not files and not sets:
        return None
    from streamsmith.config import load_spec, load_spec_file

    if yaml_file is not None:
        return load_spec_file(yaml_file, files or (), sets or (), storage_root=root)
    if app is None:
        return load_spec(DEFAULT_READING_SPEC, files or (), sets or (), storage_root=root)
    return spec_for(app, files, sets, root)[1]


def _check_lake_tables(sql: str, spec: PipelineSpec) -> None:
    """A UserError when ``sql`` reads a table that a flow of ``spec`` writes to
    PostgreSQL rather than to the lake: Spark would only say it cannot find it."""
    from streamsmith.io.lake_paths import lake_tables
    from streamsmith.read.errors import NotOnFastPath
    from streamsmith.read.transpile import SparkQuery

    try:
        read = SparkQuery(sql).tables
    except NotOnFastPath:
        return  # Spark will parse it, and say what is wrong
    lake = {name.lower() for name in lake_tables(spec.root)}
    for name, sink in ((name, sink) for name, f in spec.flows.items() for _, sink in f.named_sinks):
        table = str(sink.settings.get("table", ""))
        if sink.format == "postgres" and table.lower() in read - lake:
            from streamsmith.io.postgres.dsn import dsn_origin

            raise UserError(
                f"table {table} is in PostgreSQL, not the lake: flow {name} writes it to "
                f"{spec.postgres.db_schema}.{table} on {dsn_origin(spec)}; query it there "
                f"(psql \"$DSN\" -c 'SELECT * FROM {spec.postgres.db_schema}.{table}')"
            )


def _yaml_spec(app: str | None) -> Path | None:
    """The YAML spec file ``app`` names (none: ./streamsmith.yml, or the SDP project's
    spark-pipeline.yml here, if there is one)."""
    here = spec_here() if app is None else None
    path = Path(app).expanduser() if app is not None else here or Path(SPEC_FILE)
    if path.is_dir():
        path = sdp_spec_in(path, parents=False) or path / SPEC_FILE
    if path.suffix in (".yml", ".yaml") and path.is_file():
        return path.resolve()
    return None


def _check_root(root: Path) -> None:
    if not root.is_dir():
        raise UserError(f"storage root {root} does not exist: run a pipeline first or pass --root")


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
        f'"SHOW TABLES"); other JDBC clients: any user, the password in {server.secret_file}',
        to_stderr=True)  # fmt: skip
    return server


def run_sql(spark: Any, root: Path, sql: str, max_rows: int) -> tuple[list[Any], list[str]]:
    """Run SQL over the lake's views; SQL errors become UserErrors naming the problem."""
    from pyspark.errors import AnalysisException, ParseException

    from streamsmith.io.lake_paths import lake_tables
    from streamsmith.read.time_travel import spark_time_travel

    register_views(spark, root)
    sql = spark_time_travel(sql, lake_tables(root))
    try:
        frame = spark.sql(sql)
        rows = frame.limit(max_rows).collect()
    except (AnalysisException, ParseException) as exc:
        message = str(exc).splitlines()[0]
        raise UserError(f"query failed: {message}") from None
    return rows, frame.columns
