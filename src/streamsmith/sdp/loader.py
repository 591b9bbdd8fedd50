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

from pyspark.pipelines.output import MaterializedView, Table, TemporaryView
from pyspark.sql import DataFrame, SparkSession

from streamsmith.config import PipelineSpec, deep_merge, load_spec, read_spec_yaml
from streamsmith.config.sdp_project import SdpProject, read_project
from streamsmith.errors import UserError
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
from streamsmith.sdp.session import PipelineSession
from streamsmith.sdp.sql import ExpectingTable, ExpectingView
from streamsmith.spark.session import build_session
from streamsmith.transforms.expectations import Expectation


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
    for key, value in project.code_settings.items():
        spark.conf.set(key, value)
    graph = load_graph(
        project.files(), project.folder, PipelineSession(spark),
        catalog=project.catalog, database=project.database,
    )  # fmt: skip
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
    for flow in graph.flows.values():
        output = graph.outputs[flow.target]
        if isinstance(output, TemporaryView):
            continue
        found = facts[flow.name]
        assert isinstance(output, Table)
        description = output.comment or f"{graph.kind(flow.target)} {flow.target} ({flow.where})"
        partitions = tuple(output.partition_cols or ())
        if not found.streaming:
            if len(graph.flows_into(flow.target)) > 1:
                raise UserError(
                    f"{flow.where}: flow {flow.name!r} reads in batch into {flow.target!r}, "
                    "which other flows write: a table several flows append to takes streams"
                )
            if isinstance(output, ExpectingView) and output.expectations:
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
        sink: dict[str, Any] = {"format": "delta", "table": flow.target}
        if partitions:
            sink["partition_by"] = list(partitions)
        flows[flow.name] = {"source": source, "sink": sink, "description": description}
        if flow.cdc is not None:
            flows[flow.name]["cdc"] = flow.cdc.cdc_block(found.schema.names)
        if streamed[1:]:
            flows[flow.name]["streams"] = {table: table for table in streamed[1:]}
        definitions.append(
            FlowDefinition(
                name=flow.name,
                transform=_stream_transform(frames, flow),
                description=description,
                quarantine=False,
                record_late=False,
                streams=tuple(StreamInput(table, _as_read) for table in streamed[1:]),
                appends_with_others=flow.cdc is None,
                expectations=_expectations(output),
            )
        )
    return definitions, views, sources, flows


def _expectations(output: Table) -> tuple[Expectation, ...]:
    """The Lakeflow expectations a SQL streaming table declares, as streamsmith's."""
    if not isinstance(output, ExpectingTable):
        return ()
    return tuple(Expectation(e.name, e.sql, e.action) for e in output.expectations)


def _stream_transform(frames: GraphFrames, flow: DeclaredFlow) -> Transform:
    """The flow's transform: its function's frame (which reads its input itself)."""

    def transform(events: DataFrame, **_streams: DataFrame) -> DataFrame:
        return frames.frame(events.sparkSession, flow)

    transform.__qualname__ = f"sdp flow {flow.name} ({flow.where})"
    return transform


def _view_query(frames: GraphFrames, flow: DeclaredFlow) -> Callable[[SparkSession], DataFrame]:
    """The view's query: its function's frame, built anew at each refresh."""

    def query(spark: SparkSession) -> DataFrame:
        return frames.frame(spark, flow)

    return query


def _as_read(frame: DataFrame) -> DataFrame:
    return frame
