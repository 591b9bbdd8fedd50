"""Answer Spark SQL over the lake in-process with DuckDB, as Spark would.

One DuckDB connection per question: a view for each lake table the query reads (over its
committed files, :mod:`streamsmith.read.tables`) and for the event log, the session time
zone and NULL ordering of Spark, the query transpiled by
:class:`~streamsmith.read.transpile.SparkQuery`. Results come back as the Python values
PySpark's ``Row`` holds (a struct is a :class:`Record` that prints as a ``Row`` does, a
timestamp a naive local ``datetime``), so ``streamsmith query`` prints the same text on
both engines. Anything DuckDB refuses raises :class:`NotOnFastPath`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamsmith.io.lake_paths import is_delta, lake_tables
from streamsmith.monitor.eventlog import EVENT_COLUMNS, EVENTS_VIEW, events_dir
from streamsmith.read.errors import NotOnFastPath, first_line
from streamsmith.read.tables import (
    Field,
    duckdb_type,
    empty_select,
    listed_files,
    literal,
    load_table,
    parquet_files,
    quote,
    staged,
    view_sql,
)
from streamsmith.read.transpile import SparkQuery

if TYPE_CHECKING:
    import duckdb

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
# Spark type names of DuckDB types, for the columns of a table without a saved schema.
_SPARK_NAMES = {"DOUBLE": "double", "FLOAT": "float", "DECIMAL": "decimal"}


class Record(tuple[Any, ...]):
    """A row or struct as PySpark's ``Row`` is: a tuple with field names, printed
    ``Row(a=1, b='x')``, turned into a dict by :meth:`asDict`."""

    __fields__: tuple[str, ...]

    def __new__(cls, fields: Sequence[str], values: Iterable[Any]) -> Record:
        record = super().__new__(cls, values)
        record.__fields__ = tuple(fields)
        return record

    def asDict(self, recursive: bool = False) -> dict[str, Any]:
        """The fields by name; ``recursive`` turns nested records into dicts too."""
        if not recursive:
            return dict(zip(self.__fields__, self, strict=True))
        return {name: _plain(value) for name, value in zip(self.__fields__, self, strict=True)}

    def __repr__(self) -> str:
        pairs = ", ".join(
            f"{name}={value!r}" for name, value in zip(self.__fields__, self, strict=True)
        )
        return f"Row({pairs})"


def _plain(value: Any) -> Any:
    if isinstance(value, Record):
        return value.asDict(recursive=True)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def answer(
    root: Path, sql: str, *, max_rows: int, time_zone: str = "UTC", ansi: bool = True
) -> tuple[list[Record], list[str]]:
    """The first ``max_rows`` rows of ``sql`` over the lake at ``root`` and their column
    names, as Spark would give them; raises NotOnFastPath for what only Spark can answer."""
    query = SparkQuery(sql)
    import duckdb

    connection = duckdb.connect(":memory:")
    try:
        try:
            connection.execute(f"SET TimeZone = {literal(time_zone)}")
        except duckdb.Error:
            raise NotOnFastPath(f"DuckDB knows no time zone {time_zone}") from None
        connection.execute("SET default_null_order = 'nulls_first_on_asc_last_on_desc'")
        # The views read each file's footer for its columns, the query again: read once
        connection.execute("SET parquet_metadata_cache = true")
        with tempfile.TemporaryDirectory(prefix="streamsmith-s3-read-") as staging:
            fields, folders = _register_views(connection, root, query, time_zone, Path(staging))
            _lock(connection, folders)
            relation = connection.sql(query.to_duckdb(fields, ansi=ansi))
            columns, types = list(relation.columns), list(relation.types)
            rows = relation.limit(max_rows).fetchall()
            return [Record(columns, map(_spark_value, row, types)) for row in rows], columns
    except duckdb.Error as exc:  # a view or the query DuckDB cannot bind or run
        raise NotOnFastPath(f"DuckDB: {first_line(exc)}") from None
    finally:
        connection.close()


def _lock(connection: duckdb.DuckDBPyConnection, folders: Iterable[Path]) -> None:
    """Let the query read the views' folders and nothing else, for good: no other file
    (``FROM 'any/file.csv'`` or a table function slipped past the transpiler), no
    extension installed or loaded, no setting changed back."""
    allowed = sorted({form for folder in folders for form in (folder, folder.resolve())})
    listed = ", ".join(literal(f"{folder}/") for folder in allowed)
    connection.execute(f"SET allowed_directories = [{listed}]")
    connection.execute("SET enable_external_access = false")
    connection.execute("SET autoinstall_known_extensions = false")
    connection.execute("SET autoload_known_extensions = false")
    connection.execute("SET lock_configuration = true")


def _register_views(
    connection: duckdb.DuckDBPyConnection,
    root: Path,
    query: SparkQuery,
    time_zone: str,
    staging: Path,
) -> tuple[dict[str, list[Field]], list[Path]]:
    """A view for each table ``query`` reads that the lake has (one per version it
    travels to); their fields, and the folders the views read (a table on S3 is read
    from its files copied under ``staging``)."""
    import duckdb

    tables = {name.lower(): path for name, path in lake_tables(root).items()}
    fields: dict[str, list[Field]] = {}
    folders: list[Path] = []
    for name in sorted(query.tables):
        if name == EVENTS_VIEW:
            connection.execute(f"CREATE VIEW {quote(name)} AS {_events_sql(root)}")
            fields[name] = [Field(column, kind) for column, kind in EVENT_COLUMNS]
            folders.append(events_dir(root))
            continue
        travel = query.versions.get(name)
        if travel is not None:
            path = tables.get(travel.table.lower())
            if path is None:
                continue
            # a Parquet table has no version: load_table leaves it to Spark, which says so
            version = travel.resolve(path, time_zone) if is_delta(path) else 0
            table = load_table(travel.table, path, version)
        elif name in tables:
            path = tables[name]
            table = load_table(name, path)
        else:
            continue
        table = staged(table, staging / name)
        folders.append(table.path)
        raw: dict[str, Any] = {}
        if table.files:  # every file's columns: a table whose schema grew has several
            try:
                relation = connection.sql(f"SELECT * FROM {parquet_files(table.files)} LIMIT 0")
            except duckdb.Error as exc:  # files whose columns DuckDB cannot unite
                raise NotOnFastPath(f"table {name}: {first_line(exc)}") from None
            raw = dict(zip(relation.columns, relation.types, strict=True))
        connection.execute(f"CREATE VIEW {quote(name)} AS {view_sql(table, raw)}")
        data = table.data
        if data is None:
            data = tuple(
                Field(column, _SPARK_NAMES.get(str(kind).split("(")[0], str(kind)))
                for column, kind in raw.items()
            )
        fields[name] = [*data, *table.partitions]
    return fields, folders


def _events_sql(root: Path) -> str:
    """The event log as Spark reads it: every file of the folder, JSON lines typed by
    the log's schema, malformed lines (a killed writer's torn last line) dropped."""
    folder = events_dir(root)
    files = listed_files(folder) if folder.is_dir() else []
    if not files:
        return empty_select([Field(column, kind) for column, kind in EVENT_COLUMNS])
    columns = ", ".join(
        f"{literal(column)}: {literal(duckdb_type(kind))}" for column, kind in EVENT_COLUMNS
    )
    paths = ", ".join(literal(str(file)) for file in files)
    return (
        f"SELECT * FROM read_json([{paths}], format = 'newline_delimited', "
        f"columns = {{{columns}}}, ignore_errors = true)"
    )


def _spark_value(value: Any, kind: Any) -> Any:
    """A DuckDB result value as PySpark's ``Row`` holds the same Spark value."""
    if value is None:
        return None
    kind_id = kind.id
    if kind_id == "struct":
        names = [name for name, _ in kind.children]
        return Record(names, (_spark_value(value[n], t) for n, t in kind.children))
    if kind_id in ("list", "array"):
        element = kind.children[0][1]
        return [_spark_value(item, element) for item in value]
    if kind_id == "map":
        key_kind, value_kind = kind.children[0][1], kind.children[1][1]
        return {_spark_value(k, key_kind): _spark_value(v, value_kind) for k, v in value.items()}
    if kind_id == "timestamp with time zone":
        # PySpark: the instant as a naive datetime in this process's local time
        micros = (value - _EPOCH) // _MICROSECOND
        return datetime.fromtimestamp(micros // 1_000_000).replace(microsecond=micros % 1_000_000)
    if kind_id in ("hugeint", "uhugeint") and not -(2**63) <= value < 2**63:
        raise NotOnFastPath("a value beyond 64 bits (Spark's ANSI mode fails on overflow)")
    if kind_id == "blob":
        return bytearray(value)
    return value
