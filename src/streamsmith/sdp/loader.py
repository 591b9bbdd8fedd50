"""An SDP project as a streamsmith app: its spec, its graph, and the plan's parts.

The graph's definitions become streamsmith's: a streaming flow (a ``@dp.table``, an
``@dp.append_flow``, a SQL ``STREAMING TABLE`` or ``FLOW``) is a flow appending to the
Delta table it targets, whose source is the first of the pipeline's tables it streams
(so streamsmith orders it after the flows writing that table, as in a multi-hop
pipeline) or else the input its code reads; an AUTO CDC flow is such a flow whose rows
are change events, applied to its table by key (its ``cdc:`` block); a batch flow
(``@dp.materialized_view``) is a materialized view, recomputed after each catch-up run;
a temporary view is inlined in the flows that read it. Loading imports the project's
files and analyses each flow with Spark, as ``spark-pipelines`` does when it registers
them, so it starts the session.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.pipelines.output import MaterializedView, Sink, Table, TemporaryView
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamsmith.config import PipelineSpec, deep_merge, load_spec, read_spec_yaml
from streamsmith.config.sdp_project import SdpProject, read_project
from streamsmith.errors import UserError
from streamsmith.io.delta import NO_SETTINGS, TableSettings
from streamsmith.io.sources.declared import READS
from streamsmith.runtime.app import (
    App,
    FlowDefinition,
    StreamInput,
    Transform,
    ViewDefinition,
)
from streamsmith.sdp.analysis import FlowFacts, GraphFrames, analyse
from streamsmith.sdp.graph import DeclaredFlow, DeclaredGraph, load_graph
from streamsmith.sdp.rejects import with_rejects
from streamsmith.sdp.session import PipelineSession, Reads
from streamsmith.sdp.sql import ExpectingView
from streamsmith.spark.session import build_session
from streamsmith.transforms.expectations import Expectation
from streamsmith.transforms.quarantine import RAW, SOURCE_FILE


@dataclass(frozen=True)
class LoadedProject:
    """A project loaded: its spec file, its graph and what the analysis found."""

    project: SdpProject
    graph: DeclaredGraph
    facts: Mapping[str, FlowFacts]


def load_project(
    path: Path,
    files: Sequence[Path] = (),
    sets: Sequence[str] = (),
    *,
    overrides: Mapping[str, Any] | None = None,
    storage_root: str | None = None,
    spark: SparkSession | None = None,
) -> tuple[App, PipelineSpec, LoadedProject]:
    """The app and spec of the SDP project whose ``spark-pipeline.yml`` is ``path``, a
    ``streamsmith.yml`` beside it, then ``files`` and ``--set`` values layered over; and
    the graph loaded (``spark``: the session to analyse with, by default the spec's)."""
    project = read_project(path)
    layers = [*([project.overlay] if project.overlay else []), *files]
    base = project.base_document

    def spec_of(document: Mapping[str, Any]) -> PipelineSpec:
        return load_spec(document, layers, sets, overrides=overrides, storage_root=storage_root)

    first = _settings_only(base, layers, sets, overrides, storage_root)
    if spark is None:
        spark = build_session(first.session_spark, f"streamsmith-{project.name}")
    graph = _project_graph(project, spark)
    facts = analyse(graph, spark, first.root)
    frames = GraphFrames(graph, first.root)
    definitions, views, sources, flows = _plan_parts(graph, facts, frames)
    if not definitions and not views:
        raise UserError(f"{path}: the pipeline defines no table or materialized view to run")
    document = {**base, "sources": sources, "flows": flows}
    spec = spec_of(document)
    app = App(
        name=project.name,
        description=f"Spark Declarative Pipelines project {project.name} ({path})",
        flows=tuple(definitions),
        default_spec={**document, "storage_root": spec.storage_root},
        views=tuple(views),
    )
    return app, spec, LoadedProject(project, graph, facts)


def _project_graph(project: SdpProject, spark: SparkSession) -> DeclaredGraph:
    """The project's files imported with its settings on ``spark`` (its code reads them
    with ``spark.conf.get``)."""
    for key, value in project.code_settings.items():
        spark.conf.set(key, value)
    return load_graph(
        project.files(), project.folder, PipelineSession(spark),
        catalog=project.catalog, database=project.database,
    )  # fmt: skip


_GRAPH_KEYS = ("sources", "flows", "materialized_views")


def _settings_only(
    base: Mapping[str, Any],
    layers: Sequence[Path],
    sets: Sequence[str],
    overrides: Mapping[str, Any] | None,
    storage_root: str | None,
) -> PipelineSpec:
    """The spec before the graph is known: its storage root and Spark settings, with
    what the layers say of flows left out (they name flows the graph has yet to make)."""
    document = dict(base)
    for layer in layers:
        found = {k: v for k, v in read_spec_yaml(layer).items() if k not in _GRAPH_KEYS}
        document = deep_merge(document, found)
    settings = [s for s in sets if s.split(".", 1)[0] not in _GRAPH_KEYS]
    return load_spec(document, (), settings, overrides=overrides, storage_root=storage_root)


def _plan_parts(
    graph: DeclaredGraph, facts: Mapping[str, FlowFacts], frames: GraphFrames
) -> tuple[list[FlowDefinition], list[ViewDefinition], dict[str, Any], dict[str, Any]]:
    """The flows, views, sources and flow specs the graph's definitions become (see the
    module docstring)."""
    definitions: list[FlowDefinition] = []
    views: list[ViewDefinition] = []
    sources: dict[str, Any] = {}
    flows: dict[str, Any] = {}
    applied: dict[str, FlowFacts] = {}  # a table's first AUTO CDC flow
    for flow in graph.flows.values():
        output = graph.outputs[flow.target]
        if isinstance(output, TemporaryView):
            continue
        found = facts[flow.name]
        assert isinstance(output, Table | Sink)
        description = output.comment or f"{graph.kind(flow.target)} {flow.target} ({flow.where})"
        partitions = tuple(output.partition_cols or ()) if isinstance(output, Table) else ()
        settings = _table_settings(output, flow.where)
        if flow.once:
            views.append(_once_flow(frames, flow, output, found, description, partitions))
            continue
        if isinstance(output, Sink) and not found.streaming:
            raise UserError(
                f"{flow.where}: flow {flow.name!r} reads in batch into sink {flow.target!r}: "
                "a flow into a sink streams (read its input with spark.readStream)"
            )
        if not found.streaming:
            if len(graph.flows_into(flow.target)) > 1:
                raise UserError(
                    f"{flow.where}: flow {flow.name!r} reads in batch into {flow.target!r}, "
                    "which other flows write: a table several flows append to takes streams"
                )
            if flow.expectations or (isinstance(output, ExpectingView) and output.expectations):
                raise UserError(
                    f"{flow.where}: expectations on materialized view {flow.target!r} are not "
                    "supported by streamsmith yet (they are on streaming tables)"
                )
            views.append(
                ViewDefinition(
                    name=flow.target,
                    query=_view_query(frames, flow),
                    reads=(*found.batch, *found.streamed),
                    description=description,
                    partition_by=partitions,
                    settings=settings,
                )
            )
            continue
        if isinstance(output, MaterializedView):  # a batch read fits nothing else
            raise UserError(
                f"{flow.where}: materialized view {flow.target!r} reads a stream: read its "
                "input with spark.read (or make it a @dp.table, a streaming table)"
            )
        streamed = list(found.streamed)
        if streamed:
            source = streamed[0]
            for table in streamed:
                sources[table] = {"format": "delta", "table": table}
        else:
            source = f"{flow.name}_input"
            reads = ", ".join(found.external) or "its own reads"
            sources[source] = {"format": "sdp", "options": {READS: reads}}
        sink = _sink_block(graph, flow, output, partitions, settings)
        flows[flow.name] = {"source": source, "sink": sink, "description": description}
        if flow.cdc is not None:
            flows[flow.name]["cdc"] = flow.cdc.cdc_block(found.schema.names)
            _check_same_changes(applied.setdefault(flow.target, found), found)
        if streamed[1:]:
            flows[flow.name]["streams"] = {table: table for table in streamed[1:]}
        expectations = _expectations(output, flow)
        quarantines = any(e.action == "quarantine" for e in expectations)
        definitions.append(
            FlowDefinition(
                name=flow.name,
                transform=_stream_transform(frames, flow, lineage=quarantines),
                description=description,
                quarantine=quarantines or found.rejects,
                record_late=False,
                streams=tuple(StreamInput(table, _as_read) for table in streamed[1:]),
                appends_with_others=True,  # append flows, or AUTO CDC flows, into one table
                expectations=expectations,
                batch_arguments={"backfill": True},
            )
        )
    return definitions, views, sources, flows


def _sink_block(
    graph: DeclaredGraph,
    flow: DeclaredFlow,
    output: Table | Sink,
    partitions: tuple[str, ...],
    settings: TableSettings,
) -> dict[str, Any]:
    """The spec's ``sink`` of a streaming flow: its table, laid out as declared, or the
    sink ``dp.create_sink`` made."""
    sink: dict[str, Any] = {"format": "delta", "table": flow.target}
    if isinstance(output, Sink):
        sink = sink_spec(output, graph.where(output.source_code_location))
    if partitions:
        sink["partition_by"] = list(partitions)
    if settings.properties:
        sink["properties"] = dict(settings.properties)
    if settings.cluster_by:
        sink["cluster_by"] = list(settings.cluster_by)
    return sink


def _table_settings(output: Table | Sink, where: str) -> TableSettings:
    """The Delta table properties and clustering columns a table declares (a sink
    declares none); partitions and clustering together are refused, as Delta does."""
    if not isinstance(output, Table):
        return NO_SETTINGS
    if output.partition_cols and output.cluster_by:
        raise UserError(
            f"{where}: {output.name!r} sets both partition_cols and cluster_by: a Delta "
            "table is partitioned or clustered, not both"
        )
    properties = {str(k): str(v) for k, v in (output.table_properties or {}).items()}
    return TableSettings(properties, tuple(output.cluster_by or ()))


def _check_same_changes(first: FlowFacts, flow: FlowFacts) -> None:
    """Several AUTO CDC flows into one table apply their changes to the same rows and
    state: they must agree on the keys, the SCD type, the options that shape the state
    and the table's columns (UserError naming both)."""
    if first is flow:
        return
    assert first.flow.cdc is not None and flow.flow.cdc is not None

    def shape(facts: FlowFacts) -> dict[str, Any]:
        assert facts.flow.cdc is not None and facts.table_schema is not None
        rules = facts.flow.cdc.rules(facts.schema.names)
        return {
            "keys": rules.keys,
            "SCD type": rules.scd_type,
            "ignore_null_updates": rules.ignore_null_updates,
            "apply_as_truncates (given or not)": rules.apply_as_truncates is not None,
            "tracked columns": rules.tracked if rules.scd_type == 2 else (),
            "table columns": [(f.name, f.dataType) for f in facts.table_schema.fields],
        }

    ours, theirs = shape(first), shape(flow)
    differ = [name for name in ours if ours[name] != theirs[name]]
    if differ:
        raise UserError(
            f"{flow.flow.where}: AUTO CDC flows {first.flow.name!r} and {flow.flow.name!r} "
            f"into {flow.flow.target!r} differ in their {', '.join(differ)}: flows into "
            "one table apply their changes alike"
        )


def _once_flow(
    frames: GraphFrames,
    flow: DeclaredFlow,
    output: Table | Sink,
    found: FlowFacts,
    description: str,
    partitions: tuple[str, ...],
) -> ViewDefinition:
    """A once flow: a batch query appended to its table in the first run only (run with
    the materialized views, as a backfill)."""
    if isinstance(output, Sink) or found.streaming:
        raise UserError(
            f"{flow.where}: once flow {flow.name!r} must read in batch (spark.read) into a "
            "streaming table"
        )
    return ViewDefinition(
        name=flow.name,
        query=_view_query(frames, flow),
        reads=(*found.batch, *found.streamed),
        description=description,
        partition_by=partitions,
        once_into=flow.target,
    )


def sink_spec(sink: Sink, where: str) -> dict[str, Any]:
    """The streamsmith sink ``dp.create_sink`` declares: a Delta table at the ``path``
    it names (or the pipeline's own ``tableName``), or a Kafka ``topic`` with Spark's
    Kafka options."""
    options = {key: str(value) for key, value in sink.options.items()}
    if sink.format == "delta":
        if "tableName" in options:
            return {"format": "delta", "table": options["tableName"].split(".")[-1]}
        if "path" in options:
            return {"format": "delta", "table": sink.name, "path": options["path"]}
        raise UserError(f"{where}: delta sink {sink.name!r} needs option path or tableName")
    if sink.format == "kafka":
        topic = options.pop("topic", None)
        if topic is None:
            raise UserError(f"{where}: kafka sink {sink.name!r} needs option topic")
        return {"format": "kafka", "topic": topic, "options": options}
    raise UserError(
        f"{where}: sink {sink.name!r} has format {sink.format!r}: streamsmith writes "
        "SDP sinks of format delta or kafka"
    )


def _expectations(output: Table | Sink, flow: DeclaredFlow) -> tuple[Expectation, ...]:
    """The Lakeflow expectations of the flow's function (its decorators) and of its SQL
    streaming table, as streamsmith's."""
    declared = (*flow.expectations, *getattr(output, "expectations", ()))
    return tuple(Expectation(e.name, e.sql, e.action) for e in declared)


def _stream_transform(frames: GraphFrames, flow: DeclaredFlow, *, lineage: bool) -> Transform:
    """The flow's transform: its function's frame (which reads its input itself), with
    the records its JSON and CSV reads reject (``streamsmith.sdp.rejects``). With
    ``lineage`` (a flow quarantining by its expectations), each row carries what its
    quarantine record keeps: the row as JSON for its raw payload, and no source file
    (the function's own read does not say which one). In a backfill (``backfill``, a
    batch argument) the function reads in batch, the pipeline's tables from their
    backfills."""

    def transform(events: DataFrame, backfill: bool = False, **_streams: DataFrame) -> DataFrame:
        reads = Reads(rejects=[])
        frame = frames.frame(events.sparkSession, flow, reads, backfill=backfill)
        if lineage:
            row = F.to_json(F.struct(*[F.col(f"`{c}`") for c in frame.columns]))
            frame = frame.select("*", row.alias(RAW), F.lit(None).cast("string").alias(SOURCE_FILE))
        return with_rejects(frame, reads.rejects) if reads.rejects else frame

    transform.__qualname__ = f"sdp flow {flow.name} ({flow.where})"
    return transform


def _view_query(frames: GraphFrames, flow: DeclaredFlow) -> Callable[[SparkSession], DataFrame]:
    """The view's query: its function's frame, built anew at each refresh."""

    def query(spark: SparkSession) -> DataFrame:
        return frames.frame(spark, flow)

    return query


def _as_read(frame: DataFrame) -> DataFrame:
    return frame


def dataset_frame(
    spark: SparkSession,
    spec: Path,
    dataset: str,
    inputs: Mapping[str, DataFrame] | None = None,
) -> DataFrame:
    """The frame the flow into ``dataset`` of the project ``spec`` computes, the
    pipeline's datasets it reads given as ``inputs`` (by name): a project's tests run its
    transforms on small DataFrames this way, without storage or a query.

    >>> dataset_frame(spark, Path("spark-pipeline.yml"), "evens", {"numbers": numbers})
    """
    project = read_project(spec)
    graph = _project_graph(project, spark)
    flows = graph.flows_into(dataset)
    if len(flows) != 1:
        raise UserError(f"{spec}: {dataset!r} is written by {len(flows)} flows, not one")
    given = dict(inputs or {})

    def stand_in(name: str, streaming: bool) -> DataFrame:
        if name not in given:
            raise UserError(f"{flows[0].where}: reads {name!r}: pass it in inputs")
        return given[name]

    absent = Path(spec).resolve().parent / ".no-storage"  # stand_in answers every read
    return GraphFrames(graph, absent).frame(spark, flows[0], stand_in=stand_in)
