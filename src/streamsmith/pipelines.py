"""Pipelines of your own: a spec (``streamsmith.yml``) whose flows name their code.

A flow names a Python function (``transform: module:function``, looked up in the spec's
folder first) or a SQL query over its source (``sql: SELECT ... FROM <source>``), and
its ``event_time``. The records' schema is DDL in the source (``schema:``): records that
cannot be read, miss a ``required`` field or the event time, or hold a value of the
wrong type go to the flow's quarantine table. The event-time declaration is applied
here, at the edge: the transform gets the accepted events with the watermark set and,
when a window is declared, a ``window`` column to group by, so it stays a batch-like
query, and the late-events table follows the same declaration.

The result is an :class:`~streamsmith.runtime.app.App` like the reference apps, so every
command and guarantee applies to it unchanged.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from streamsmith.config import FlowSpec, PipelineSpec, load_spec, load_spec_file
from streamsmith.errors import UserError
from streamsmith.loading import load_callable, load_module
from streamsmith.monitor.recorder import first_line
from streamsmith.runtime.app import App, FlowDefinition, Transform
from streamsmith.runtime.supervisor import PipelineError
from streamsmith.schemas.ddl import DDLError, parse_schema
from streamsmith.transforms.events import parse_events


def load_pipeline(
    path: Path,
    files: Sequence[Path] = (),
    sets: Sequence[str] = (),
    *,
    overrides: Mapping[str, Any] | None = None,
    storage_root: str | None = None,
) -> tuple[App, PipelineSpec]:
    """The pipeline the spec file ``path`` declares (or the Python file, its
    :class:`~streamsmith.Pipeline`), with further files and ``--set`` values layered over
    it. A relative ``storage_root`` in the file is taken from the file's folder, so the
    pipeline runs the same from anywhere."""
    folder = path.parent
    if path.suffix == ".py":
        app = python_pipeline(path)
        spec = load_spec(
            {**app.default_spec, "storage_root": str(folder / "streamsmith-data")},
            files,
            sets,
            overrides=overrides,
            storage_root=storage_root,
        )
        return app, spec
    spec = load_spec_file(path, files, sets, overrides=overrides, storage_root=storage_root)
    document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return pipeline_app(spec, folder, str(path), document), spec


def python_pipeline(path: Path) -> App:
    """The one :class:`~streamsmith.Pipeline` the Python file ``path`` declares, imported
    as a module from its folder (so its functions are importable by name)."""
    from streamsmith.api import Pipeline

    module = load_module(path.stem, f"pipeline file {path}", search=(path.parent,))
    found = [value for value in vars(module).values() if isinstance(value, Pipeline)]
    if len(found) != 1:
        raise UserError(
            f"pipeline file {path} declares {len(found)} streamsmith.Pipeline objects: "
            "declare exactly one (pipeline = streamsmith.Pipeline(...))"
        )
    return found[0].app


def pipeline_app(spec: PipelineSpec, folder: Path, where: str, document: Mapping[str, Any]) -> App:
    """An App whose flows run the code the spec names (see the module docstring)."""
    # A source's records are parsed once for all its flows, which so see the same events:
    # a record lacking any of their event-time columns is quarantined for all of them.
    times: dict[str, list[str]] = {}
    for flow in spec.flows.values():
        if flow.event_time is not None and flow.event_time.column is not None:
            times.setdefault(flow.source, []).append(flow.event_time.column)
    parsers: dict[str, Transform | None] = {}
    flows = []
    for name, flow in spec.flows.items():
        first = flow.source not in parsers
        where_flow = f"{where}: flows.{name}"
        definition = _flow(name, flow, spec, folder, where_flow, times.get(flow.source, []))
        parsers.setdefault(flow.source, definition.prepare)
        # The first flow over a source keeps its quarantine for all (another takes it
        # over when that one is disabled: see runtime.plan).
        keeps = first and definition.prepare is not None  # only parsed records can fail
        flows.append(replace(definition, prepare=parsers[flow.source], quarantine=keeps))
    return App(
        name=spec.app,
        description=f"pipeline {spec.app} ({where})",
        flows=tuple(flows),
        default_spec={**document, "storage_root": spec.storage_root},
    )


def _flow(
    name: str,
    flow: FlowSpec,
    spec: PipelineSpec,
    folder: Path,
    where: str,
    event_times: Sequence[str],
) -> FlowDefinition:
    source = spec.sources[flow.source]
    schema = _record_schema(source.record_schema, f"{where}: sources.{flow.source}.schema")
    if schema is None and source.format not in ("text", "rate"):
        raise UserError(
            f"{where}: source {flow.source!r} needs the records' schema: set "
            f'sources.{flow.source}.schema, e.g. "user string, ts timestamp"'
        )
    rule = flow.event_time
    column = rule.column if rule is not None else None
    if column is not None and schema is not None and column not in schema.fieldNames():
        raise UserError(
            f"{where}.event_time.column: {column!r} is not a field of source "
            f"{flow.source!r} (its fields: {', '.join(schema.fieldNames())})"
        )
    required = (*source.required, *event_times)
    unknown = [field for field in required if schema is not None and field not in schema.names]
    if unknown:
        raise UserError(
            f"{where}: field(s) {', '.join(unknown)} (required, or the event time of a flow "
            f"over it) not in the schema of source {flow.source!r}"
        )
    if flow.transform is not None:
        code: Transform = load_callable(
            flow.transform, f"{where}.transform", search=(folder,), arguments=(None,)
        )
    elif flow.sql is not None:
        code = partial(_run_sql, _sql_text(flow.sql, folder, f"{where}.sql"), flow.source)
    else:
        raise UserError(
            f"{where}: name the flow's code: transform: module:function, or "
            f"sql: SELECT ... FROM {flow.source}"
        )
    return FlowDefinition(
        name=name,
        prepare=(
            partial(parse_events, schema=schema, required=tuple(dict.fromkeys(required)))
            if schema is not None
            else None
        ),
        transform=_reported(code, where if flow.sql is None else f"{where}.sql", folder),
        description=flow.description or flow.transform or f"sql: {_one_line(flow.sql, 80)}",
        record_schema=schema,
        from_spec=True,
    )


def _sql_text(sql: str, folder: Path, where: str) -> str:
    """The query itself, or the text of the ``.sql`` file it names (from the spec's folder)."""
    if not sql.endswith(".sql") or len(sql.split()) > 1:
        return sql
    path = folder / sql
    if not path.is_file():
        raise UserError(f"{where}: no SQL file {path}")
    return path.read_text(encoding="utf-8")


def _record_schema(ddl: str | None, where: str) -> StructType | None:
    if ddl is None:
        return None
    try:
        return parse_schema(ddl)
    except DDLError as exc:
        raise UserError(f"{where}: {exc}") from None


def _reported(code: Transform, where: str, folder: Path) -> Transform:
    """``code``, whose exceptions while the flow is built fail the run naming the flow:
    a mistake Spark's analyser finds (unknown column, SQL that does not parse) as one
    line, like any spec mistake; anything else with the traceback of the user's own
    files (not streamsmith's or Spark's)."""

    def call(events: DataFrame, **inputs: Any) -> DataFrame:
        try:
            return code(events, **inputs)
        except (AnalysisException, ParseException) as exc:
            raise UserError(f"{where}: {first_line(str(exc)).rstrip(';')}") from None
        except Exception as exc:  # the user's code: any error is theirs to see
            frames = [
                frame
                for frame in traceback.extract_tb(exc.__traceback__)
                if Path(frame.filename).resolve().is_relative_to(folder.resolve())
            ]
            trace = "".join(traceback.format_list(frames))
            raise PipelineError(
                f"{where}: the flow's code raised {type(exc).__name__}: {exc}\n{trace}".rstrip()
            ) from exc

    return call


def _run_sql(query: str, view: str, events: DataFrame, **_inputs: Any) -> DataFrame:
    """The flow's SQL over its source's events, known by the source's name."""
    events.createOrReplaceTempView(view)
    return events.sparkSession.sql(query)


def _one_line(text: str | None, width: int) -> str:
    line = " ".join((text or "").split())
    return line if len(line) <= width else line[: width - 1] + "…"
