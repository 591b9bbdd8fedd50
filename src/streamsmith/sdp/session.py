"""The ``spark`` an SDP project's definitions see: the real session, but for reads of the
pipeline's own datasets by name.

SDP resolves ``spark.read.table(name)``, ``spark.readStream.table(name)``,
``spark.table(name)`` and the names of its SQL to the pipeline's datasets. This wrapper
does the same by asking a :data:`Resolve` callback for each name (None: not one of the
pipeline's, so Spark's catalog answers), and records the files a flow reads itself
(``spark.readStream.format("json").load(path)``), which ``dry-run`` shows. In a
backfill, ``spark.readStream`` reads in batch, so the same definitions run as one batch
job. Everything else is the session itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from streamsmith.sdp.rejects import (
    CORRUPT,
    CORRUPT_OPTION,
    CSV_PUSHDOWN,
    rejectable,
    split,
    widened,
)
from streamsmith.spark.temp_views import sql_over

# (name as written, streaming) -> the dataset's frame, or None for a name not the pipeline's.
Resolve = Callable[[str, bool], DataFrame | None]

_STREAM = re.compile(r"\bSTREAM\s*(?:\(\s*([\w.`]+)\s*\)|\s([\w.`]+))", re.IGNORECASE)
_LOADS = ("load", "json", "csv", "parquet", "orc", "text", "xml", "table")


@dataclass
class Reads:
    """What one flow's function read: the pipeline's datasets (streamed or not) and
    anything else, as ``format path`` texts. With ``rejects`` (a list), its JSON and CSV
    file reads keep their malformed records there (``streamsmith.sdp.rejects``)."""

    streamed: list[str] = field(default_factory=list)
    batch: list[str] = field(default_factory=list)
    external: list[str] = field(default_factory=list)
    rejects: list[DataFrame] | None = None


@dataclass(frozen=True)
class Binding:
    """What a :class:`PipelineSession` answers with while a flow's function runs."""

    spark: SparkSession
    resolve: Resolve
    reads: Reads
    batch: bool = False  # a backfill: every read, spark.readStream's too, is a batch read


class PipelineSession:
    """A :class:`SparkSession` stand-in for definitions; see the module docstring. One
    object is the ``spark`` of every file of a project; what it resolves names to is
    bound around each call of a flow's function (:meth:`bound`)."""

    def __init__(self, spark: SparkSession) -> None:
        self._binding: ContextVar[Binding] = ContextVar("sdp_session")
        self._default = Binding(spark, lambda _name, _streaming: None, Reads())

    @contextmanager
    def bound(
        self, spark: SparkSession, resolve: Resolve, reads: Reads, *, batch: bool = False
    ) -> Iterator[None]:
        """Within, names resolve by ``resolve`` and reads are recorded in ``reads``; with
        ``batch``, ``spark.readStream`` reads in batch (a backfill of the same code)."""
        token = self._binding.set(Binding(spark, resolve, reads, batch))
        try:
            yield
        finally:
            self._binding.reset(token)

    @property
    def _current(self) -> Binding:
        return self._binding.get(self._default)

    @property
    def _spark(self) -> SparkSession:
        return self._current.spark

    @property
    def _reads(self) -> Reads:
        return self._current.reads

    def _resolve(self, name: str, streaming: bool) -> DataFrame | None:
        return self._current.resolve(name, streaming)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spark, name)

    @property
    def read(self) -> _Reader:
        return _Reader(self._spark.read, self, streaming=False)

    @property
    def readStream(self) -> _Reader:
        if self._current.batch:
            return _Reader(self._spark.read, self, streaming=False)
        return _Reader(self._spark.readStream, self, streaming=True)

    def table(self, name: str) -> DataFrame:
        return self._table(name, streaming=False)

    def _table(self, name: str, *, streaming: bool) -> DataFrame:
        found = self._resolve(name, streaming)
        if found is not None:
            return found
        streaming = streaming and not self._current.batch
        reader = self._spark.readStream if streaming else self._spark.read
        self._reads.external.append(f"table {name}")
        return reader.table(name)

    def sql(self, query: str, args: Any = None, **kwargs: Any) -> DataFrame:
        """``query`` with the pipeline's datasets it names (``STREAM(x)`` or ``STREAM x``
        for a streaming read) bound as temporary views of those names."""
        import sqlglot
        from sqlglot import exp

        streamed: dict[str, str] = {}

        def as_view(match: re.Match[str]) -> str:
            name = (match.group(1) or match.group(2)).strip("`")
            view = "__stream_" + re.sub(r"\W", "_", name)
            streamed[view] = name
            return view

        text = _STREAM.sub(as_view, query)
        views = {view: self._table(name, streaming=True) for view, name in streamed.items()}
        try:
            tree = sqlglot.parse_one(text, read="spark")
        except sqlglot.errors.ParseError:
            tree = None  # Spark's own parser names the mistake below
        if tree is not None:
            ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
            for table in tree.find_all(exp.Table):
                name = ".".join(part.name for part in table.parts)
                if table.name in ctes or name in streamed:
                    continue
                found = self._resolve(name, False)
                if found is not None:
                    views[table.name] = found
        return sql_over(self._spark, text, views, args=args, **kwargs)


class _Reader:
    """A ``DataFrameReader`` / ``DataStreamReader`` whose ``table(name)`` resolves the
    pipeline's datasets and whose loads are recorded."""

    def __init__(self, reader: Any, session: PipelineSession, *, streaming: bool) -> None:
        self._reader = reader
        self._session = session
        self._streaming = streaming
        self._format = ""
        self._schema: Any = None
        self._options: dict[str, Any] = {}

    def table(self, name: str) -> DataFrame:
        return self._session._table(name, streaming=self._streaming)

    def format(self, source: str) -> _Reader:
        self._format = source
        self._reader = self._reader.format(source)
        return self

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._reader, name)
        if not callable(method):
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            if name == "schema":
                self._schema = args[0] if args else kwargs.get("schema")
            elif name in ("option", "options"):
                self._options.update(dict([args]) if name == "option" else kwargs)
            if name in _LOADS:
                path = args[0] if args else kwargs.get("path", "")
                self._session._reads.external.append(f"{self._format or name} {path}".strip())
                return self._load(method, name, args, kwargs)
            result = method(*args, **kwargs)
            if result is self._reader or type(result) is type(self._reader):
                self._reader = result
                return self
            return result

        return call

    def _load(self, method: Any, name: str, args: Any, kwargs: dict[str, Any]) -> Any:
        """``method``'s frame; a JSON or CSV read whose malformed records would become
        rows of nulls keeps them in the flow's rejects instead (when it collects them)."""
        collected = self._session._reads.rejects
        source = self._format if name == "load" else name
        schema = kwargs.get("schema", self._schema)
        if collected is None or not rejectable(source, schema, {**self._options, **kwargs}):
            return method(*args, **kwargs)
        if source.lower() == "csv":
            self._session._spark.conf.set(CSV_PUSHDOWN, "false")
        reader = self._reader.schema(widened(schema)).option(CORRUPT_OPTION, CORRUPT)
        frame = getattr(reader, name)(*args, **{k: v for k, v in kwargs.items() if k != "schema"})
        accepted, rejects = split(frame, source)
        collected.append(rejects)
        return accepted
