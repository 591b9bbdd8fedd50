"""A lake table as Spark reads it: its committed files, its schema, its partition values.

A table a streaming query writes has Spark's file-sink log in ``_spark_metadata``: one
file per micro-batch listing the data files it added (``v1`` then one JSON line per
file), written only once the batch commits, and every tenth batch a ``.compact`` file
holding the whole list so far. Spark reads exactly the files of that log, so the files
of a batch killed before its commit, though in the folder, are never read; so does this
module. A Delta table's files are those of its transaction log's latest version
(delta-rs reads the log): every lake table unless its flow chose Parquet. Tables
without a log (Parquet tables written from ``foreachBatch``, lookup tables) are listed
as Spark lists a folder: names starting with ``_`` or ``.`` are skipped, ``key=value``
folders are partitions.

Types come from the schema streamsmith saves beside every table (Spark's schema JSON);
Spark types map to DuckDB types one to one (``timestamp`` is an instant: TIMESTAMPTZ).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from streamsmith.io.lake_paths import COMMIT_LOG, SCHEMA_FILE, is_delta
from streamsmith.object_store import ObjectPath, object_path, storage_options
from streamsmith.read.errors import NotOnFastPath

SparkType = str | dict[str, Any]  # a type as Spark's schema JSON writes it
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"

_SIMPLE_TYPES = {
    "string": "VARCHAR",
    "long": "BIGINT",
    "integer": "INTEGER",
    "short": "SMALLINT",
    "byte": "TINYINT",
    "double": "DOUBLE",
    "float": "FLOAT",
    "boolean": "BOOLEAN",
    "date": "DATE",
    "timestamp": "TIMESTAMPTZ",
    "timestamp_ntz": "TIMESTAMP",
    "binary": "BLOB",
}
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_LOG_ENTRY = re.compile(r"(\d+)(\.compact)?")


@dataclass(frozen=True)
class Field:
    """A column: its name and its Spark type."""

    name: str
    type: SparkType


@dataclass(frozen=True)
class DataFile:
    """A Parquet file of a table and the partition values of its folder (in folder
    order; None for Spark's null partition)."""

    path: Path
    partition: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class LakeTable:
    """What a view over a table needs: its files and columns as Spark sees them."""

    name: str
    path: Path
    files: tuple[DataFile, ...]
    data: tuple[Field, ...] | None  # the saved schema without partition columns
    partitions: tuple[Field, ...]


def quote(name: str) -> str:
    """A DuckDB identifier."""
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    """A DuckDB string literal."""
    return "'" + text.replace("'", "''") + "'"


def duckdb_type(spark_type: SparkType) -> str:
    """The DuckDB type holding the values of a Spark type (from its schema JSON)."""
    if isinstance(spark_type, str):
        if spark_type in _SIMPLE_TYPES:
            return _SIMPLE_TYPES[spark_type]
        decimal = _DECIMAL.fullmatch(spark_type)
        if decimal:
            return f"DECIMAL({decimal.group(1)}, {decimal.group(2)})"
        raise NotOnFastPath(f"a column of Spark type {spark_type}")
    kind = spark_type.get("type")
    if kind == "array":
        return f"{duckdb_type(spark_type['elementType'])}[]"
    if kind == "map":
        key, value = duckdb_type(spark_type["keyType"]), duckdb_type(spark_type["valueType"])
        return f"MAP({key}, {value})"
    if kind == "struct":
        fields = ", ".join(
            f"{quote(f['name'])} {duckdb_type(f['type'])}" for f in spark_type["fields"]
        )
        return f"STRUCT({fields})"
    raise NotOnFastPath(f"a column of Spark type {kind}")


def has_timestamp(spark_type: SparkType) -> bool:
    """Whether a type holds Spark timestamps (instants) anywhere inside."""
    return "timestamp" in json.dumps(spark_type).replace("timestamp_ntz", "")


def load_table(name: str, path: Path, version: int | None = None) -> LakeTable:
    """The table at ``path`` as Spark would read it now, or at Delta ``version``."""
    path = path.absolute()
    schema: list[Field] | None
    if is_delta(path):
        found, schema = delta_snapshot(path, version)
    elif version is not None:
        raise NotOnFastPath(f"time travel on table {name}, which keeps no versions")
    else:
        found, schema = committed_files(path), _saved_fields(path)
    files = tuple(DataFile(file, _partition_of(file, path)) for file in found)
    columns = [[column for column, _ in file.partition] for file in files]
    if any(names != columns[0] for names in columns):
        raise NotOnFastPath(f"table {name} has files in differently partitioned folders")
    partition_names = columns[0] if columns else []
    if schema is None:
        partitions = tuple(Field(c, _inferred_type(name, c, files)) for c in partition_names)
        return LakeTable(name, path, files, None, partitions)
    by_name = {field.name.lower(): field for field in schema}
    missing = [c for c in partition_names if c.lower() not in by_name]
    if missing:
        raise NotOnFastPath(f"table {name}: partition column {missing[0]} is not in its schema")
    partitions = tuple(by_name[c.lower()] for c in partition_names)
    taken = {c.lower() for c in partition_names}
    data = tuple(field for field in schema if field.name.lower() not in taken)
    return LakeTable(name, path, files, data, partitions)


def delta_snapshot(table: Path, version: int | None = None) -> tuple[list[Path], list[Field]]:
    """The data files and columns of a Delta table's latest version (or ``version``),
    from its transaction log (delta-rs: no JVM). Tables whose files alone do not give
    their rows (deletion vectors, column mapping) are left to Spark."""
    from deltalake import DeltaTable

    snapshot = DeltaTable(str(table), version=version, storage_options=storage_options(table))
    features = set(snapshot.protocol().reader_features or [])
    unsupported = sorted(features & {"deletionVectors", "columnMapping"})
    if unsupported:
        raise NotOnFastPath(f"a Delta table with {', '.join(unsupported)}")
    files = [_local_path(uri) for uri in snapshot.file_uris()]
    schema = json.loads(snapshot.schema().to_json())
    return files, [Field(field["name"], field["type"]) for field in schema["fields"]]


def committed_files(table: Path) -> list[Path]:
    """The data files Spark reads for ``table``: those of its commit log, else the
    folder's listing."""
    log = table / COMMIT_LOG
    if log.is_dir():
        return sink_log_files(log)
    return listed_files(table)


def sink_log_files(log: Path) -> list[Path]:
    """The files the file-sink log ``log`` holds, as of its latest batch: the newest
    ``.compact`` file up to it, then every batch file after it, deletions applied."""
    batches: dict[int, Path] = {}
    compacted: set[int] = set()
    for entry in log.iterdir():
        match = _LOG_ENTRY.fullmatch(entry.name)
        if match:
            batch = int(match.group(1))
            batches[batch] = entry
            if match.group(2):
                compacted.add(batch)
    if not batches:
        return []
    latest = max(batches)
    start = max((batch for batch in compacted if batch <= latest), default=0)
    files: dict[str, Path] = {}
    for batch in range(start, latest + 1):
        if batch not in batches:
            raise NotOnFastPath(f"the commit log {log} has no batch {batch}")
        for record in _log_records(batches[batch]):
            if record.get("isDir"):
                continue
            location = str(record["path"])
            if record.get("action", "add") == "delete":
                files.pop(location, None)
            else:
                files[location] = _local_path(location)
    return list(files.values())


def listed_files(table: Path) -> list[Path]:
    """A folder's data files as Spark's file index lists them."""
    found: list[Path] = []
    for entry in sorted(table.iterdir()):
        name = entry.name
        if (name.startswith("_") and "=" not in name) or name.startswith("."):
            continue
        if name.endswith("._COPYING_"):
            continue
        if entry.is_dir():
            found.extend(listed_files(entry))
        elif entry.is_file():
            found.append(entry)
    return found


def view_sql(table: LakeTable, raw_types: Mapping[str, Any]) -> str:
    """A SELECT giving ``table``'s rows as Spark reads them: data columns as the schema
    types them, then the partition columns from the folder names.

    ``raw_types`` are the DuckDB types (``DuckDBPyType``) of the columns as DuckDB reads
    the files, by name; a Spark timestamp Spark stored as INT96 reads as a naive UTC time.
    A column of the schema no file holds yet (the schema grew) reads as null, as in Spark.
    """
    if not table.files:
        if table.data is None:
            raise NotOnFastPath(f"table {table.name} has neither files nor a saved schema")
        return empty_select([*table.data, *table.partitions])
    raw_by_name = {name.lower(): (name, kind) for name, kind in raw_types.items()}
    if table.data is None:
        data = [_raw_column(table.name, name, kind) for name, kind in raw_types.items()]
    else:
        data = []
        for field in table.data:
            if field.name.lower() not in raw_by_name:
                data.append(f"CAST(NULL AS {duckdb_type(field.type)}) AS {quote(field.name)}")
                continue
            name, kind = raw_by_name[field.name.lower()]
            data.append(f"{conform(quote(name), kind, field.type)} AS {quote(field.name)}")
    groups: dict[tuple[tuple[str, str | None], ...], list[str]] = {}
    for file in table.files:
        groups.setdefault(file.partition, []).append(str(file.path))
    selects = []
    for partition, paths in groups.items():
        values = [
            f"CAST({'NULL' if value is None else literal(value)} AS {duckdb_type(field.type)})"
            f" AS {quote(field.name)}"
            for (_, value), field in zip(partition, table.partitions, strict=True)
        ]
        columns = ", ".join([*data, *values])
        selects.append(f"SELECT {columns} FROM {parquet_files(paths)}")
    return " UNION ALL ".join(selects)


def parquet_files(files: Sequence[DataFile] | Sequence[str]) -> str:
    """DuckDB's reader over ``files``, their columns matched by name (files written
    before a schema grew lack the new columns: null there)."""
    paths = [str(f.path) if isinstance(f, DataFile) else f for f in files]
    listed = "[" + ", ".join(literal(path) for path in paths) + "]"
    return f"read_parquet({listed}, union_by_name = true)"


def empty_select(fields: Sequence[Field]) -> str:
    """A SELECT of no rows with these columns (a table nothing was written to yet)."""
    nulls = ", ".join(f"CAST(NULL AS {duckdb_type(f.type)}) AS {quote(f.name)}" for f in fields)
    return f"SELECT {nulls} WHERE false"


def conform(expression: str, raw: Any, spark_type: SparkType) -> str:
    """``expression`` (of DuckDB type ``raw``) as the DuckDB type of ``spark_type``."""
    target = duckdb_type(spark_type)
    if str(raw) == target:
        return expression
    if not has_timestamp(spark_type):
        return f"CAST({expression} AS {target})"
    if spark_type == "timestamp":
        if raw.id == "timestamp":  # INT96: Spark wrote UTC
            return f"timezone('UTC', {expression})"
        return f"CAST({expression} AS {target})"
    if isinstance(spark_type, dict) and spark_type.get("type") == "struct" and raw.id == "struct":
        children = {name.lower(): (name, kind) for name, kind in raw.children}
        parts = []
        for field in spark_type["fields"]:
            if field["name"].lower() not in children:
                raise NotOnFastPath(f"struct field {field['name']} is not in the files")
            name, kind = children[field["name"].lower()]
            inner = conform(f"{expression}.{quote(name)}", kind, field["type"])
            parts.append(f"{quote(field['name'])} := {inner}")
        packed = f"struct_pack({', '.join(parts)})"
        return f"CASE WHEN {expression} IS NULL THEN NULL ELSE {packed} END"
    if isinstance(spark_type, dict) and spark_type.get("type") == "array" and raw.id == "list":
        inner = conform("element", raw.children[0][1], spark_type["elementType"])
        return f"list_transform({expression}, lambda element: {inner})"
    raise NotOnFastPath(f"timestamps inside a {raw.id} column")


def _raw_column(table: str, name: str, kind: Any) -> str:
    """A column of a table without a saved schema, as Spark would infer its type."""
    if "TIMESTAMP" in str(kind) and "TIME ZONE" not in str(kind):
        # INT96 (a Spark timestamp) or a local time (timestamp_ntz): only the schema knows
        raise NotOnFastPath(f"table {table} has no saved schema to type its timestamps")
    return quote(name)


def _log_records(file: Path) -> list[dict[str, Any]]:
    """The entries of one file of the sink log (Spark reads a damaged one its own way)."""
    lines = file.read_text(encoding="utf-8").splitlines()
    if not lines or not lines[0].startswith("v"):
        raise NotOnFastPath(f"commit log file {file} has no version line")
    try:
        records = [json.loads(line) for line in lines[1:] if line.strip()]
    except json.JSONDecodeError:
        raise NotOnFastPath(f"commit log file {file} is not JSON lines") from None
    if not all(isinstance(record, dict) and "path" in record for record in records):
        raise NotOnFastPath(f"commit log file {file} has an entry without a path")
    return records


def staged(table: LakeTable, folder: Path) -> LakeTable:
    """``table`` with its files on S3 copied into the local ``folder`` (same layout, so
    the partition folders stay): DuckDB reads local files only (no network extension is
    loaded, none downloaded)."""
    if not isinstance(table.path, ObjectPath):
        return table
    files = []
    for file in table.files:
        local = folder / file.path.relative_to(table.path)
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(file.path.read_bytes())
        files.append(DataFile(local, file.partition))
    return LakeTable(table.name, folder, tuple(files), table.data, table.partitions)


def _local_path(location: str) -> Path:
    parsed = urlparse(location)
    if parsed.scheme in ("s3", "s3a"):
        return object_path(location)
    if parsed.scheme not in ("", "file"):
        raise NotOnFastPath(f"files on {parsed.scheme}:// storage")
    return Path(unquote(parsed.path))


def _partition_of(file: Path, table: Path) -> tuple[tuple[str, str | None], ...]:
    """The ``key=value`` folders between ``table`` (absolute) and ``file``."""
    try:
        folders = file.parent.relative_to(table).parts
    except ValueError:
        try:  # the log names files by the path the writer used: a link, or relative
            folders = file.parent.resolve().relative_to(table.resolve()).parts
        except ValueError:
            message = f"a committed file {file} lies outside its table {table}"
            raise NotOnFastPath(message) from None
    values: list[tuple[str, str | None]] = []
    for folder in folders:
        column, equals, value = folder.partition("=")
        if not equals or not column:
            raise NotOnFastPath(f"folder {folder} in table {table.name} is not key=value")
        text = _unescape(value)
        values.append((_unescape(column), None if text == NULL_PARTITION else text))
    return tuple(values)


def _unescape(text: str) -> str:
    """Spark's escaping of partition folder names (``%3A`` for ``:``) undone."""
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


def _saved_fields(path: Path) -> list[Field] | None:
    file = path / SCHEMA_FILE
    if not file.is_file():
        return None
    schema = json.loads(file.read_text(encoding="utf-8"))
    return [Field(field["name"], field["type"]) for field in schema["fields"]]


def _inferred_type(table: str, column: str, files: Sequence[DataFile]) -> str:
    """A partition column's type as Spark infers it from folder names, for the cases
    that are plain (integers, dates, strings)."""
    values = {value for file in files for name, value in file.partition if name == column and value}
    if values and all(re.fullmatch(r"-?\d+", v) for v in values):
        widest = max(abs(int(v)) for v in values)
        return "integer" if widest < 2**31 else "long"
    if values and all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", v) for v in values):
        return "date"
    if any(re.fullmatch(r"[-+.\deE:T ]+", v) for v in values):
        raise NotOnFastPath(f"table {table} has no saved schema to type partition {column}")
    return "string"
