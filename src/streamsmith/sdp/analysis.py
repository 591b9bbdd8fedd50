"""Calling an SDP project's flow functions: what each reads, whether it streams, and its
frame when its query starts.

A flow's function reads the pipeline's datasets by name. :class:`GraphFrames` answers
those names: a temporary view by calling its own function (so it is inlined, as in SDP),
a table or materialized view by its Delta table under the storage root. The analysis
(:func:`analyse`, before anything runs) calls every function once with Spark's analyser:
it finds the graph's edges (each flow's reads, through temporary views), and a mistake
(an unknown table or column) is one line naming the file and line. A table no run has
written yet is stood in for by an empty frame of the schema its own flows produce.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pyspark.errors import AnalysisException
from pyspark.pipelines.output import Table, TemporaryView
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from streamsmith.errors import UserError
from streamsmith.io.lake_paths import backfill_path, is_delta, table_path
from streamsmith.monitor.recorder import first_line
from streamsmith.schemas.ddl import DDLError, parse_schema
from streamsmith.sdp.graph import DeclaredFlow, DeclaredGraph
from streamsmith.sdp.session import Reads
from streamsmith.spark.conf import session_conf

StandIn = Callable[[str, bool], DataFrame]


@dataclass(frozen=True)
class FlowFacts:
    """What the analysis learnt of one flow."""

    flow: DeclaredFlow
    streaming: bool
    schema: StructType
    streamed: tuple[str, ...]  # the pipeline's tables it reads as streams
    batch: tuple[str, ...]  # ... and as tables
    external: tuple[str, ...]  # what else it reads ("json /data/orders")
    table_schema: StructType | None = None  # an AUTO CDC flow's table's, when not `schema`
    rejects: bool = False  # whether its file reads can reject records (sdp.rejects)


@dataclass(frozen=True)
class GraphFrames:
    """The frames of a project's flows over the tables under ``root``."""

    graph: DeclaredGraph
    root: Path

    def frame(
        self,
        spark: SparkSession,
        flow: DeclaredFlow,
        reads: Reads | None = None,
        stand_in: StandIn | None = None,
        *,
        backfill: bool = False,
    ) -> DataFrame:
        """The frame ``flow``'s function returns, its reads resolved (a table that does
        not exist yet by ``stand_in``, when given) and recorded in ``reads``. With
        ``backfill``, every read is a batch read and the pipeline's tables are their
        backfills (``streamsmith backfill``: the flows upstream ran before)."""
        reads = reads if reads is not None else Reads()
        inlining: list[str] = []

        def resolve(name: str, streaming: bool) -> DataFrame | None:
            key = self.graph.key(name)
            if key is None:
                return None
            if isinstance(self.graph.outputs[key], TemporaryView):
                if key in inlining:
                    cycle = " -> ".join([*inlining, key])
                    raise UserError(f"{flow.where}: temporary views read each other: {cycle}")
                inlining.append(key)
                try:
                    (view,) = self.graph.flows_into(key)
                    return _shaped(_with_conf(spark, view.spark_conf, view.func), None, view)
                finally:
                    inlining.pop()
            (reads.streamed if streaming else reads.batch).append(key)
            path = (backfill_path if backfill else table_path)(self.root, key)
            if stand_in is not None and not is_delta(path):
                return stand_in(key, streaming)
            reader = spark.readStream if streaming and not backfill else spark.read
            return reader.format("delta").load(str(path))

        with self.graph.session.bound(spark, resolve, reads, batch=backfill):
            frame = _with_conf(spark, flow.spark_conf, flow.func)
        output = self.graph.outputs[flow.target]
        return _shaped(frame, output if isinstance(output, Table) else None, flow)


def analyse(graph: DeclaredGraph, spark: SparkSession, root: Path) -> dict[str, FlowFacts]:
    """Every flow's :class:`FlowFacts`, by flow name (temporary views' flows included)."""
    frames = GraphFrames(graph, root)
    facts: dict[str, FlowFacts] = {}
    analysing: list[str] = []

    def stand_in(dataset: str, streaming: bool) -> DataFrame:
        schema = None
        for flow in graph.flows_into(dataset):
            found = study(flow)
            schema = schema or found.table_schema or found.schema
        assert schema is not None  # graph.check: every dataset has a flow
        nulls = [F.lit(None).cast(f.dataType).alias(f.name) for f in schema.fields]
        if streaming:
            return spark.readStream.format("rate").load().select(*nulls)
        return spark.createDataFrame([], schema)

    def study(flow: DeclaredFlow) -> FlowFacts:
        if flow.name in facts:
            return facts[flow.name]
        if flow.name in analysing:
            cycle = " -> ".join([*analysing[analysing.index(flow.name) :], flow.name])
            raise UserError(f"{flow.where}: flows read each other's datasets in a cycle: {cycle}")
        analysing.append(flow.name)
        reads = Reads(rejects=[])
        try:
            with _user_errors(graph, flow):
                frame = frames.frame(spark, flow, reads, stand_in)
                schema = frame.schema
            table_schema = None if flow.cdc is None else _cdc_table(flow, frame).schema
        finally:
            analysing.pop()
        facts[flow.name] = FlowFacts(
            flow, frame.isStreaming, schema, tuple(dict.fromkeys(reads.streamed)),
            tuple(dict.fromkeys(reads.batch)), tuple(dict.fromkeys(reads.external)),
            table_schema, bool(reads.rejects),
        )  # fmt: skip
        return facts[flow.name]

    for flow in graph.flows.values():
        study(flow)
    return facts


def _cdc_table(flow: DeclaredFlow, events: DataFrame) -> DataFrame:
    """The (empty) table an AUTO CDC flow's events build; a column its clauses name that
    the events lack is the flow's mistake, named at its line."""
    assert flow.cdc is not None
    try:
        return flow.cdc.table_frame(events)
    except ValueError as exc:
        raise UserError(f"{flow.where}: AUTO CDC flow {flow.name}: {exc}") from None
    except AnalysisException as exc:  # the user's sequence_by or delete condition
        what = first_line(str(exc)).rstrip(";")
        raise UserError(
            f"{flow.where}: AUTO CDC flow {flow.name}: {type(exc).__name__}: {what}"
        ) from exc


def _with_conf(
    spark: SparkSession, conf: dict[str, str], func: Callable[[], DataFrame]
) -> DataFrame:
    """``func()`` with the flow's ``spark_conf`` set in the session while it builds its
    frame (SQL settings the analyser reads take effect)."""
    with session_conf(spark, conf):
        return func()


def _shaped(frame: object, output: Table | None, flow: DeclaredFlow) -> DataFrame:
    """The function's frame, checked to be one, with the declared ``schema`` of its table
    applied (its columns, in its order and types)."""
    if not isinstance(frame, DataFrame):
        raise UserError(
            f"{flow.where}: the function of flow {flow.name!r} returned "
            f"{type(frame).__name__}, not a DataFrame"
        )
    if output is None or output.schema is None:
        return frame
    schema = output.schema
    if isinstance(schema, str):
        try:
            schema = parse_schema(schema)
        except DDLError as exc:
            raise UserError(f"{flow.where}: schema of {output.name!r}: {exc}") from None
    return frame.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])


@contextmanager
def _user_errors(graph: DeclaredGraph, flow: DeclaredFlow) -> Iterator[None]:
    """A mistake in a flow's function as one line naming the project file and line
    where it shows (the function's line that raised, else the decorator's)."""
    try:
        yield
    except UserError:
        raise
    except Exception as exc:  # the user's code: any error is theirs to see, in one line
        frames = [
            frame
            for frame in traceback.extract_tb(exc.__traceback__)
            if Path(frame.filename).resolve().is_relative_to(graph.folder.resolve())
        ]
        where = flow.where
        if frames:
            shown = Path(frames[-1].filename).resolve().relative_to(graph.folder.resolve())
            where = f"{shown}:{frames[-1].lineno}"
        kind = graph.kind(flow.target)
        what = first_line(str(exc)).rstrip(";")
        raise UserError(f"{where}: {kind} {flow.target}: {type(exc).__name__}: {what}") from exc
