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

import re
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel
from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from streamsmith.config import (
    INFER,
    FlowSpec,
    PipelineSpec,
    deep_merge,
    load_spec,
    load_spec_file,
    read_spec_yaml,
)
from streamsmith.config.sdp_project import is_sdp_spec
from streamsmith.defaults import root_in
from streamsmith.errors import UserError
from streamsmith.io.kafka.client import KafkaSourceError
from streamsmith.io.schema_store import (
    SAMPLE_RECORDS,
    InputSample,
    file_sample,
    inferred_schema,
    latest,
    sampled_schema,
    schema_dir,
)
from streamsmith.io.sources.kafka import kafka_sample
from streamsmith.io.value_formats import load_values, source_values
from streamsmith.loading import load_callable, load_module
from streamsmith.monitor.recorder import first_line
from streamsmith.runtime.app import App, FlowDefinition, Transform
from streamsmith.runtime.supervisor import PipelineError
from streamsmith.schemas.ddl import DDLError, parse_schema
from streamsmith.schemas.inference import InferenceError
from streamsmith.spark.temp_views import sql_over
from streamsmith.transforms.events import RecordParser


def load_pipeline(
    path: Path,
    files: Sequence[Path] = (),
    sets: Sequence[str] = (),
    *,
    overrides: Mapping[str, Any] | None = None,
    storage_root: str | None = None,
    keep_inferred: bool = True,
) -> tuple[App, PipelineSpec]:
    """The pipeline the spec file ``path`` declares (or the Python file, its
    :class:`~streamsmith.Pipeline`; or an SDP project's ``spark-pipeline.yml``, its
    graph: ``streamsmith.sdp``), with further files and ``--set`` values layered over
    it. A relative ``storage_root`` in the file (for a Python file, its ``Pipeline``'s
    ``spec``; by default ``streamsmith-data``) is taken from the file's folder, so the
    pipeline runs the same from anywhere. A schema inferred now (``schema: infer``) is
    stored as the source's version 0 unless ``keep_inferred`` is false (``dry-run``)."""
    folder = path.parent
    if is_sdp_spec(path):
        from streamsmith.sdp.loader import load_project

        loaded = load_project(path, files, sets, overrides=overrides, storage_root=storage_root)
        return loaded[0], loaded[1]
    if path.suffix == ".py":
        app = python_pipeline(path)
        declared = app.default_spec.get("storage_root", "streamsmith-data")
        spec = load_spec(
            {**app.default_spec, "storage_root": root_in(folder, declared)},
            files,
            sets,
            overrides=overrides,
            storage_root=storage_root,
        )
        return app, with_source_folders(with_value_schemas(spec, folder), folder)
    document = read_spec_yaml(path)
    library = load_libraries(document, folder, str(path))
    defaults = _flow_defaults(document, library)
    spec = load_spec_file(
        path, files, sets, overrides=overrides, storage_root=storage_root, flows=defaults
    )
    spec = with_source_folders(with_value_schemas(spec, folder), folder)
    # What the flows fall back on, laid under each flow as the spec loader lays it.
    document = {**document, "flows": deep_merge(defaults, document.get("flows") or {})}
    app = pipeline_app(spec, folder, str(path), document, library.flows, keep_inferred)
    return app, spec


def with_source_folders(spec: PipelineSpec, folder: Path) -> PipelineSpec:
    """``spec`` with each relative source ``path`` that names a file or folder beside the
    spec (from its ``folder``, as ``libraries`` and ``sql`` files are found) made
    absolute, so input kept beside the spec is read under any storage root. A relative
    path that names nothing there stays under the storage root, the rule before this one:
    the reference apps, ``streamsmith generate`` and projects made by earlier versions
    keep their input there, and a run waiting for its first input watches it there."""
    sources = {}
    for name, source in spec.sources.items():
        given = Path(source.path).expanduser() if source.path else None
        if given is None or given.is_absolute() or "://" in str(source.path):
            sources[name] = source
            continue
        beside = folder / given
        found = beside.exists()
        sources[name] = source.model_copy(update={"path": str(beside)}) if found else source
    return spec.model_copy(update={"sources": sources})


def with_value_schemas(spec: PipelineSpec, folder: Path) -> PipelineSpec:
    """``spec`` with the ``value_schema`` files of its sources and sinks (Avro or Protobuf
    values on Kafka) found from the spec's ``folder``, as ``sql`` files are, and checked now, so
    ``dry-run`` names a missing or broken one."""

    def found(model: _Model, values: Mapping[str, Any], *at: str) -> _Model:
        named = values.get("value_schema")
        if not named:
            return model
        path = Path(str(named)).expanduser()
        path = path if path.is_absolute() else folder / path
        where = (*at, "value_schema")
        kind, message = str(values.get("value_format")), values.get("value_message")
        load_values(kind, path, message, f"{'.'.join(where)} (in {spec.origin_of(where)})")
        return model.model_copy(update={"value_schema": str(path)})

    sources = {
        name: found(source, source.model_dump(), "sources", name)
        for name, source in spec.sources.items()
    }
    flows = {}
    for name, flow in spec.flows.items():
        sink = flow.sink
        sinks = flow.sinks or {}
        flows[name] = flow.model_copy(
            update={
                "sink": sink and found(sink, sink.settings, "flows", name, "sink"),
                "sinks": flow.sinks
                and {
                    key: found(one, one.settings, "flows", name, "sinks", key)
                    for key, one in sinks.items()
                },
            }
        )
    return spec.model_copy(update={"sources": sources, "flows": flows})


_Model = TypeVar("_Model", bound=BaseModel)


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


@dataclass(frozen=True)
class Library:
    """What a spec's ``libraries`` files declare: the flows Python files register
    (``@streamsmith.flow``), and each library flow's default spec (its source, its sink,
    a SQL file's ``sql``), which the spec file may override."""

    flows: tuple[FlowDefinition, ...] = ()
    flow_specs: dict[str, dict[str, Any]] = field(default_factory=dict)


def load_libraries(document: Mapping[str, Any], folder: Path, where: str) -> Library:
    """Import the ``.py`` files and read the ``.sql`` files the spec's ``libraries`` globs
    match (from the spec's folder, in name order), as Spark Declarative Pipelines does."""
    from pydantic import ValidationError

    from streamsmith.api import Pipeline, library_of
    from streamsmith.config import LibrarySpec

    entries = document.get("libraries") or []
    if not isinstance(entries, list):
        raise UserError(f"{where}: libraries must be a list of - glob: {{include: PATTERN}}")
    sources = document.get("sources") or {}
    pipeline = Pipeline(str(document.get("app") or document.get("name") or "pipeline"))
    pipeline.sources = sources if isinstance(sources, dict) else {}
    sql_specs: dict[str, dict[str, Any]] = {}
    for index, entry in enumerate(entries):
        at = f"{where}: libraries[{index}]"
        try:
            pattern = LibrarySpec.model_validate(entry).glob.include
        except ValidationError as exc:
            problem = first_line(str(exc.errors()[0]["msg"]))
            raise UserError(f"{at}: {problem}; write - glob: {{include: flows/**}}") from None
        found = _library_files(folder, pattern)
        if not found:
            raise UserError(f"{at}: no .py or .sql file matches {pattern!r} under {folder}")
        for file in found:
            if file.suffix == ".py":
                with library_of(pipeline):
                    _import_library(file)
            else:
                name, spec = _sql_flow(file, folder, document)
                if name in sql_specs or name in pipeline._flow_specs:
                    raise UserError(f"{at}: flow {name!r} is declared twice ({file})")
                sql_specs[name] = spec
    flow_specs = {**pipeline.default_spec["flows"], **sql_specs}
    for name, spec in flow_specs.items():
        if "sinks" not in spec:
            spec.setdefault("sink", {"format": "delta", "table": name})
    return Library(pipeline.flows, flow_specs)


def _flow_defaults(document: Mapping[str, Any], library: Library) -> dict[str, dict[str, Any]]:
    """What the spec file's flows fall back on: the library flows' own specs, and for
    every flow the pipeline's only source, when it has one."""
    defaults = {name: dict(spec) for name, spec in library.flow_specs.items()}
    sources = document.get("sources")
    if isinstance(sources, Mapping) and len(sources) == 1:
        flows = document.get("flows")
        for name in [*defaults, *(flows if isinstance(flows, Mapping) else ())]:
            defaults.setdefault(str(name), {}).setdefault("source", next(iter(sources)))
    return defaults


def _library_files(folder: Path, pattern: str) -> list[Path]:
    """The files ``pattern`` matches under ``folder``; ``dir/**`` means all under dir."""
    if pattern.endswith("/**"):
        pattern += "/*"
    return sorted(
        path
        for path in folder.glob(pattern)
        if path.is_file() and path.suffix in (".py", ".sql") and "__pycache__" not in path.parts
    )


def _import_library(file: Path) -> None:
    """Run the library file, again if it ran before (its decorators register into the
    pipeline being loaded), importable by its name from its folder. Loaded from its own
    path: a module of the same name another project loaded in this process (a
    scheduler's, or tests') is not this file."""
    import importlib.util
    import sys

    if str(file.parent) not in sys.path:
        sys.path.insert(0, str(file.parent))  # the file's siblings import by name
    spec = importlib.util.spec_from_file_location(file.stem, file)
    assert spec is not None and spec.loader is not None  # a .py file that exists
    module = importlib.util.module_from_spec(spec)
    sys.modules[file.stem] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[file.stem]  # as a failed import leaves it
        raise


def _sql_flow(file: Path, folder: Path, document: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The flow a ``.sql`` library file declares: named by its ``CREATE STREAMING TABLE``
    header or else the file's name, reading the source its ``STREAM(name)`` names
    (unless the spec's ``flows.<name>.source`` says)."""
    name, _, streamed = sdp_sql(file.read_text(encoding="utf-8"))
    name = name or file.stem
    spec: dict[str, Any] = {"sql": str(file.relative_to(folder))}
    sources = document.get("sources") or {}
    named = [source for source in streamed if source in sources]
    if len(set(named)) == 1:
        spec["source"] = named[0]
    elif not named and len(set(streamed)) == 1:  # another flow's table, as in SDP
        spec["source"] = streamed[0]
    return name, spec


_CREATE = re.compile(
    r"^\s*CREATE\s+(?:OR\s+REFRESH\s+)?STREAMING\s+TABLE\s+([A-Za-z_]\w*)\s+AS\s+",
    re.IGNORECASE,
)
_STREAM = re.compile(r"\bSTREAM\s*\(\s*([A-Za-z_]\w*)\s*\)", re.IGNORECASE)


def sdp_sql(text: str) -> tuple[str | None, str, list[str]]:
    """A flow's SQL as Spark Declarative Pipelines writes it, made a plain query: the
    table a ``CREATE [OR REFRESH] STREAMING TABLE name AS`` header names (None without
    one), the query with ``STREAM(source)`` read as ``source``, and those sources."""
    body = (
        "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
        .strip()
        .rstrip(";")
    )
    header = _CREATE.match(body)
    query = body[header.end() :] if header else body
    return (header.group(1) if header else None), _STREAM.sub(r"\1", query), _STREAM.findall(query)


def _one_keeper(flows: Sequence[FlowDefinition], spec: PipelineSpec) -> list[FlowDefinition]:
    """Flows over one source that parse it alike see the same events: the first that
    keeps their quarantine table keeps it for all, whether the spec or a library file
    declares the flows (see runtime.plan, which hands it on when that flow is off)."""
    kept: set[tuple[str, Transform | None]] = set()
    result = []
    for definition in flows:
        key = (spec.flows[definition.name].source, definition.prepare)
        if definition.prepare is None or not definition.quarantine:
            result.append(definition)  # none to share: its own transform tags rejects
            continue
        result.append(replace(definition, quarantine=key not in kept))
        kept.add(key)
    return result


def pipeline_app(
    spec: PipelineSpec,
    folder: Path,
    where: str,
    document: Mapping[str, Any],
    declared: Sequence[FlowDefinition] = (),
    keep_inferred: bool = True,
) -> App:
    """An App whose flows run the code the spec names (see the module docstring), with
    the flows ``declared`` by its libraries' Python files."""
    # A source's records are parsed once for all its flows, which so see the same events:
    # a record lacking any of their event-time columns is quarantined for all of them.
    times: dict[str, list[str]] = {}
    for flow in spec.flows.values():
        if flow.event_time is not None and flow.event_time.column is not None:
            times.setdefault(flow.source, []).append(flow.event_time.column)
    parsers: dict[str, Transform | None] = {}
    flows = []
    in_code = {definition.name: definition for definition in declared}
    for name, flow in spec.flows.items():
        if name in in_code:
            flows.append(in_code[name])
            continue
        first = flow.source not in parsers
        where_flow = f"{where}: flows.{name}"
        definition = _flow(
            name, flow, spec, folder, where_flow, times.get(flow.source, []), keep_inferred
        )
        parsers.setdefault(flow.source, definition.prepare)
        # The first flow over a source keeps its quarantine for all (another takes it
        # over when that one is disabled: see runtime.plan).
        keeps = first and definition.prepare is not None  # only parsed records can fail
        flows.append(replace(definition, prepare=parsers[flow.source], quarantine=keeps))
    return App(
        name=spec.app,
        description=f"pipeline {spec.app} ({where})",
        flows=tuple(_one_keeper(flows, spec)),
        default_spec={**document, "storage_root": spec.storage_root},
    )


def _flow(
    name: str,
    flow: FlowSpec,
    spec: PipelineSpec,
    folder: Path,
    where: str,
    event_times: Sequence[str],
    keep_inferred: bool = True,
) -> FlowDefinition:
    source = spec.sources[flow.source]
    if source.binary_values and source.value_schema is not None:
        at = f"{where}: sources.{flow.source}.value_schema"
        schema: StructType | None = source_values(source, at).struct
    elif source.record_schema == INFER:
        schema = _inferred(spec, flow.source, where, keep_inferred)
    else:
        schema = _record_schema(source.record_schema, f"{where}: sources.{flow.source}.schema")
    if schema is None and source.variant is not None:
        schema = StructType([])  # the variant column alone holds the record
    if schema is None and source.format not in ("text", "rate", "delta"):
        raise UserError(
            f"{where}: source {flow.source!r} needs the records' schema: set "
            f'sources.{flow.source}.schema, e.g. "user string, ts timestamp"'
        )
    rule = flow.event_time
    column = rule.column if rule is not None else None
    # A Kafka record's own columns kept beside the fields (a timestamp as event time).
    fields = schema.fieldNames() if schema is not None else []
    if clash := [name for name in source.kafka_columns if name in fields]:
        raise UserError(
            f"{where}: sources.{flow.source}.kafka_columns: {', '.join(clash)} is also a "
            "field of the record; rename the field in the schema or leave the column out"
        )
    readable = [*fields, *source.kafka_columns]
    if column is not None and schema is not None and column not in readable:
        raise UserError(
            f"{where}.event_time.column: {column!r} is not a field of source "
            f"{flow.source!r} (its fields: {', '.join(readable)})"
        )
    required = (*source.required, *event_times)
    unknown = [field for field in required if schema is not None and field not in readable]
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
            RecordParser(
                schema,
                tuple(dict.fromkeys(required)),
                **source.parser_options,
            )
            if schema is not None
            else None
        ),
        transform=_reported(code, where if flow.sql is None else f"{where}.sql", folder),
        description=flow.description or flow.transform or f"sql: {_one_line(flow.sql, 80)}",
        record_schema=schema,
        from_spec=True,
    )


def _sql_text(sql: str, folder: Path, where: str) -> str:
    """The query itself, or the text of the ``.sql`` file it names (from the spec's
    folder), as a plain query (see :func:`sdp_sql`)."""
    if sql.endswith(".sql") and len(sql.split()) == 1:
        path = folder / sql
        if not path.is_file():
            raise UserError(f"{where}: no SQL file {path}")
        sql = path.read_text(encoding="utf-8")
    return sdp_sql(sql)[1]


def _inferred(spec: PipelineSpec, source: str, where: str, keep: bool) -> StructType:
    """The schema ``schema: infer`` stands for: the stored version, or one inferred now
    from a sample of the input (stored as version 0 if ``keep``)."""
    declared = spec.sources[source]
    hints = _record_schema(declared.schema_hints, f"{where}: sources.{source}.schema_hints")
    folder = spec.source_path(source)

    def take_sample() -> InputSample:
        if folder is not None:
            return file_sample(folder, declared.glob)
        return kafka_sample(spec.kafka_options(declared.options), SAMPLE_RECORDS)

    where = f"{where}: sources.{source}.schema: infer"
    try:
        stored = latest(schema_dir(spec.root, spec.app, source))
        if stored is not None:
            return stored.schema
        sample = take_sample()
        if not sample.records:
            raise AwaitingInput(
                f"{where}: no input to infer the schema from in {sample.place}: deliver some "
                "first, or give the schema as DDL",
                spec,
                source,
                sample.place,
                lambda: bool(take_sample().records),
            )
        if not keep:
            return sampled_schema(sample, hints)
        return inferred_schema(
            schema_dir(spec.root, spec.app, source), lambda: sample, hints
        ).schema
    except (InferenceError, KafkaSourceError) as exc:
        raise UserError(f"{where}: {exc}") from None


class AwaitingInput(UserError):
    """A source whose schema is inferred has no input yet: ``has_input()`` says when
    some arrived in ``place`` (an always-on run waits for it: ``streamsmith run``)."""

    def __init__(
        self,
        message: str,
        spec: PipelineSpec,
        source: str,
        place: str,
        has_input: Callable[[], bool],
    ) -> None:
        super().__init__(message)
        self.spec, self.source, self.place, self.has_input = spec, source, place, has_input


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
    return sql_over(events.sparkSession, query, {view: events})


def _one_line(text: str | None, width: int) -> str:
    line = " ".join((text or "").split())
    return line if len(line) <= width else line[: width - 1] + "…"
