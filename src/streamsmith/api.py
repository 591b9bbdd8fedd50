"""Declare a pipeline in Python: its sources, and each flow as a decorated function.

The decorators only register: nothing reads, starts or connects at import. A
:class:`Pipeline` holds the flows and the spec they run with by default; every command
(``streamsmith run | dry-run | backfill | status ...``) and every guarantee (exactly-once
sinks, quarantine, late events, expectations, check-upgrade) applies to it as to the
reference apps, which are written on this same API::

    from pyspark.sql import DataFrame
    import streamsmith as ss

    pipeline = ss.Pipeline(
        "orders", sources={"orders": {"format": "jsonl", "path": "input/orders"}}
    )

    @pipeline.flow(
        source="orders",
        sink={"format": "delta", "table": "order_totals"},
        schema="order_id string, amount double, ts timestamp",
        event_time=ss.EventTime("ts", lateness="10 minutes", window="5 minutes"),
        expect={"positive_amount": ss.Expect("amount > 0", "drop")},
    )
    def order_totals(orders: DataFrame) -> DataFrame:
        return orders.groupBy("window").sum("amount")

A flow's function is a batch-like query: it takes the flow's accepted events (with the
declared watermark and, given a window, a ``window`` column) and returns its output.
Keyword arguments bring the rest: each lookup table and further stream by its name,
``models`` (name -> path), ``event_time`` (the resolved :class:`EventTime`, for a
function that applies it itself, e.g. a stateful processor's timers; such a function
must not be given events watermarked twice, so a function that calls ``withWatermark``
must take ``event_time``) and, in batch runs only, ``batch_arguments``. The spec
(``streamsmith.yml`` or ``--set``) overrides the defaults given here, event time
included: ``--set flows.order_totals.event_time.lateness=1h``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar, get_args, overload

from pyspark.sql.types import StructType

from streamsmith.config import INFER, ExpectAction, parser_options
from streamsmith.errors import UserError
from streamsmith.runtime.app import App, EventTime, FlowDefinition, Transform
from streamsmith.runtime.app import StreamInput as Stream
from streamsmith.schemas.ddl import DDLError, parse_schema
from streamsmith.transforms.events import RecordParser
from streamsmith.transforms.expectations import Expectation

__all__ = ["EventTime", "Expect", "Pipeline", "Stream", "flow"]

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Expect:
    """A rule each record of a flow should meet: ``sql``, a SQL boolean expression over
    the record (null fails), and ``action`` on a record that fails: ``warn`` (count it),
    ``drop`` (count it, leave it out), ``quarantine`` (to the quarantine table, the
    expectation's name as the reason) or ``fail`` (stop the flow, showing the record)."""

    sql: str
    action: ExpectAction = "warn"

    def __post_init__(self) -> None:
        if self.action not in get_args(ExpectAction):
            choices = ", ".join(get_args(ExpectAction))
            raise UserError(f"expectation action {self.action!r}: choose one of {choices}")


@dataclass
class Pipeline:
    """A pipeline: its name, sources and flows, and the spec it runs with by default.

    ``sources`` maps each source's name to its spec (``format``, ``path`` or Kafka
    ``options``, ``schema`` ...), ``trigger`` is the default trigger (``interval=10s``,
    ``available-now``), ``spec`` any further spec keys (``storage_root``, taken from the
    pipeline file's folder when relative; ``kafka``, ``side_interval``, ...). Flows are
    added by :meth:`flow`; :attr:`app` is what the runtime runs.
    """

    name: str
    description: str = ""
    sources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    trigger: str | None = None
    spec: Mapping[str, Any] = field(default_factory=dict)
    input_hint: str = ""
    _flows: list[FlowDefinition] = field(default_factory=list, init=False, repr=False)
    _flow_specs: dict[str, dict[str, Any]] = field(default_factory=dict, init=False, repr=False)
    _parsers: dict[tuple[Any, ...], Transform] = field(default_factory=dict, init=False, repr=False)

    @overload
    def flow(
        self,
        function: F,
        /,
        *,
        name: str | None = ...,
        source: str | None = ...,
        sink: Mapping[str, Any] | None = ...,
        sinks: Mapping[str, Mapping[str, Any]] | None = ...,
        cdc: Mapping[str, Any] | None = ...,
        schema: StructType | str | None = ...,
        required: Sequence[str] = ...,
        parse: Transform | Literal[False] | None = ...,
        event_time: EventTime | None = ...,
        expect: Mapping[str, str | Expect] | None = ...,
        lookups: Sequence[str] = ...,
        streams: Mapping[str, str] | Sequence[Stream] = ...,
        models: Sequence[str] = ...,
        stateful: bool | None = ...,
        quarantine: bool | None = ...,
        record_late: bool | None = ...,
        batch_arguments: Mapping[str, Any] | None = ...,
        description: str | None = ...,
        enabled: bool = ...,
    ) -> F: ...

    @overload
    def flow(
        self,
        function: None = None,
        /,
        *,
        name: str | None = ...,
        source: str | None = ...,
        sink: Mapping[str, Any] | None = ...,
        sinks: Mapping[str, Mapping[str, Any]] | None = ...,
        cdc: Mapping[str, Any] | None = ...,
        schema: StructType | str | None = ...,
        required: Sequence[str] = ...,
        parse: Transform | Literal[False] | None = ...,
        event_time: EventTime | None = ...,
        expect: Mapping[str, str | Expect] | None = ...,
        lookups: Sequence[str] = ...,
        streams: Mapping[str, str] | Sequence[Stream] = ...,
        models: Sequence[str] = ...,
        stateful: bool | None = ...,
        quarantine: bool | None = ...,
        record_late: bool | None = ...,
        batch_arguments: Mapping[str, Any] | None = ...,
        description: str | None = ...,
        enabled: bool = ...,
    ) -> Callable[[F], F]: ...

    def flow(
        self,
        function: F | None = None,
        /,
        *,
        name: str | None = None,
        source: str | None = None,
        sink: Mapping[str, Any] | None = None,
        sinks: Mapping[str, Mapping[str, Any]] | None = None,
        cdc: Mapping[str, Any] | None = None,
        schema: StructType | str | None = None,
        required: Sequence[str] = (),
        parse: Transform | Literal[False] | None = None,
        event_time: EventTime | None = None,
        expect: Mapping[str, str | Expect] | None = None,
        lookups: Sequence[str] = (),
        streams: Mapping[str, str] | Sequence[Stream] = (),
        models: Sequence[str] = (),
        stateful: bool | None = None,
        quarantine: bool | None = None,
        record_late: bool | None = None,
        batch_arguments: Mapping[str, Any] | None = None,
        description: str | None = None,
        enabled: bool = True,
    ) -> F | Callable[[F], F]:
        """Register a flow whose code is the decorated function (its name, unless
        ``name`` is given). Usable as ``@pipeline.flow`` or ``@pipeline.flow(...)``;
        returns the function unchanged, so it stays a plain function to unit-test.

        ``source`` (by default the pipeline's only source) and ``sink`` are the flow's
        default spec (the spec file may override them); ``sinks`` instead of ``sink``
        writes the output to several sinks, by name, each with its own ``output_mode``
        (one query each; the first keeps the flow's query, quarantine and expectation
        counts: see the how-to on several sinks). ``schema`` (a StructType or DDL
        such as ``"user string, ts timestamp"``; by default the ``schema`` of the source in
        ``sources``, which a spec file may replace) is the records' schema; without
        ``parse``, records are parsed with it and a record that cannot be read, lacks a
        ``required`` field or the event-time column, or holds a value of the wrong type goes
        to the quarantine table. ``parse`` is a parser of your own (source frame -> frame
        tagged for quarantine, see ``streamsmith.transforms.quarantine``), or False for rows
        that need no parsing (a lake table read as a stream). Flows over one source with the
        same parser see the same events: the first keeps the quarantine and late-events
        tables for all (``quarantine`` and ``record_late`` default to that). ``event_time``
        declares the watermark and windows; ``expect`` maps expectation names to SQL
        (``warn``) or :class:`Expect`. ``lookups`` are lake tables joined as static frames,
        ``streams`` further streams (stream-stream joins) given as ``{input: source}`` or
        :class:`Stream` s whose sources the spec names under ``flows.<flow>.streams``;
        ``models`` are model folders. ``stateful`` (default: a window is declared) says the
        output is an aggregation. ``quarantine`` / ``record_late`` off leave those tables to
        another flow over the same events. ``cdc`` (``keys``, ``sequence_by``,
        ``apply_as_deletes``, ``except_columns``, ``scd_type``, ``track_history_columns``)
        makes the function's rows change events, applied by key to the flow's delta
        table (see the how-to on change data capture).
        """

        if source is None and len(self.sources) == 1:
            source = next(iter(self.sources))

        def register(code: F) -> F:
            flow_name = name or getattr(code, "__name__", None)
            if not flow_name or flow_name == "<lambda>":
                raise UserError(f"pipeline {self.name!r}: name the flow (name=...)")
            if any(existing.name == flow_name for existing in self._flows):
                raise UserError(f"pipeline {self.name!r} declares flow {flow_name!r} twice")
            where = f"pipeline {self.name!r} flow {flow_name!r}"
            if sink is not None and sinks is not None:
                raise UserError(f"{where}: give sink (one output) or sinks (several), not both")
            declared = self.sources.get(source or "", {})
            record_schema = _schema(schema if schema is not None else declared.get("schema"), where)
            needed = (*declared.get("required", ()), *required)
            reader = declared.get("options") if declared.get("format") != "kafka" else None
            options = parser_options(
                declared.get("schema_evolution"), declared.get("variant"), reader
            )
            prepare = self._parser(source, record_schema, needed, event_time, parse, options)
            stream_inputs, stream_sources = _streams(streams)
            siblings = [
                f
                for f in self._flows
                if f.prepare is not None
                and f.prepare is prepare
                and self._flow_specs[f.name].get("source") == source
            ]
            if quarantine is None:
                keeps_quarantine = not any(f.quarantine for f in siblings)
            else:
                keeps_quarantine = quarantine
            if record_late is None:
                same_rule = [f for f in siblings if f.event_time == event_time]
                keeps_late = not any(f.record_late for f in same_rule)
            else:
                keeps_late = record_late
            self._flows.append(
                FlowDefinition(
                    name=flow_name,
                    transform=code,
                    description=description if description is not None else _summary(code),
                    record_schema=record_schema,
                    quarantine=keeps_quarantine,
                    lookups=tuple(lookups),
                    streams=stream_inputs,
                    models=tuple(models),
                    prepare=prepare,
                    event_time=event_time,
                    stateful=(
                        stateful
                        if stateful is not None
                        else event_time is not None and event_time.window is not None
                    ),
                    record_late=keeps_late,
                    batch_arguments=dict(batch_arguments or {}),
                    expectations=_expectations(expect or {}),
                )
            )
            flow_spec: dict[str, Any] = {}
            if source is not None:
                flow_spec["source"] = source
            if sink is not None:
                flow_spec["sink"] = dict(sink)
            if sinks is not None:
                flow_spec["sinks"] = {key: dict(value) for key, value in sinks.items()}
            if cdc is not None:
                flow_spec["cdc"] = dict(cdc)
            if stream_sources:
                flow_spec["streams"] = stream_sources
            if not enabled:
                flow_spec["enabled"] = False
            self._flow_specs[flow_name] = flow_spec
            return code

        return register(function) if function is not None else register

    def _parser(
        self,
        source: str | None,
        schema: StructType | None,
        required: Sequence[str],
        event_time: EventTime | None,
        parse: Transform | Literal[False] | None,
        options: Mapping[str, Any] | None = None,
    ) -> Transform | None:
        """The flow's parser: the given one; none for ``False`` or without a schema; else
        one by ``schema``, shared by the flows over one source (so they see one set of
        events) and requiring every event-time column declared so far over it."""
        if parse is not None:
            return parse or None
        if schema is None:
            return None
        fields = (*required, *([event_time.column] if event_time else []))
        given = dict(options or {})
        key = (source, schema.json(), tuple(dict.fromkeys(fields)), tuple(sorted(given.items())))
        if key not in self._parsers:
            self._parsers[key] = RecordParser(schema, key[2], **given)
        return self._parsers[key]

    @property
    def flows(self) -> tuple[FlowDefinition, ...]:
        """The flows registered so far, in declaration order."""
        return tuple(self._flows)

    @property
    def default_spec(self) -> dict[str, Any]:
        """The spec the pipeline runs with when no file or ``--set`` says otherwise."""
        spec: dict[str, Any] = {"app": self.name, **self.spec}
        if self.trigger is not None:
            spec["trigger"] = self.trigger
        if self.sources:
            spec["sources"] = {name: dict(source) for name, source in self.sources.items()}
        spec["flows"] = {name: dict(flow) for name, flow in self._flow_specs.items()}
        return spec

    @property
    def app(self) -> App:
        """The pipeline as the runtime runs it."""
        if not self._flows:
            raise UserError(f"pipeline {self.name!r} declares no flow: add one with @flow")
        return App(
            name=self.name,
            description=self.description,
            flows=self.flows,
            default_spec=self.default_spec,
            input_hint=self.input_hint,
        )


def _schema(schema: StructType | str | None, where: str) -> StructType | None:
    if not isinstance(schema, str):
        return schema
    if schema == INFER:
        raise UserError(
            f"{where}: schema: infer is for the sources of a spec (streamsmith.yml) whose "
            "flows name their code; in Python, declare the schema"
        )
    try:
        return parse_schema(schema)
    except DDLError as exc:
        raise UserError(f"{where}: schema: {exc}") from None


def _streams(
    streams: Mapping[str, str] | Sequence[Stream],
) -> tuple[tuple[Stream, ...], dict[str, str]]:
    """Stream inputs, and the sources that feed them by default: those a ``{input:
    source}`` mapping names (whose records reach the transform unparsed), or for each
    :class:`Stream` (which parses its records) the source of its own name."""
    if isinstance(streams, Mapping):
        return tuple(Stream(name, _unparsed) for name in streams), dict(streams)
    return tuple(streams), {stream.name: stream.name for stream in streams}


def _unparsed(source: Any) -> Any:
    return source


def _expectations(expect: Mapping[str, str | Expect]) -> tuple[Expectation, ...]:
    rules = []
    for name, rule in expect.items():
        if not name.isidentifier():
            raise UserError(f"expectation name {name!r} must be an identifier")
        given = rule if isinstance(rule, Expect) else Expect(rule)
        rules.append(Expectation(name, given.sql, given.action))
    return tuple(rules)


def _summary(code: Callable[..., Any]) -> str:
    """The first line of the function's docstring: the flow's description."""
    doc = (code.__doc__ or "").strip()
    return doc.splitlines()[0] if doc else ""


# The pipeline a spec's ``libraries`` files are loading into (see streamsmith.pipelines).
_LIBRARY: ContextVar[Pipeline | None] = ContextVar("streamsmith_library", default=None)


@contextmanager
def library_of(pipeline: Pipeline) -> Iterator[Pipeline]:
    """While a spec's ``libraries`` files are imported, :func:`flow` registers into
    ``pipeline`` (as SDP's ``@dp.table`` registers into the graph being loaded)."""
    token = _LIBRARY.set(pipeline)
    try:
        yield pipeline
    finally:
        _LIBRARY.reset(token)


def _loading() -> Pipeline:
    pipeline = _LIBRARY.get()
    if pipeline is None:
        raise UserError(
            "streamsmith.flow registers a flow into the pipeline whose spec "
            "(streamsmith.yml) lists this file under libraries; run the spec "
            "(streamsmith run streamsmith.yml), or declare pipeline = streamsmith.Pipeline(...) "
            "and use @pipeline.flow"
        )
    return pipeline


def _on_loading(method: Callable[Concatenate[Pipeline, P], R]) -> Callable[P, R]:
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        return method(_loading(), *args, **kwargs)

    call.__doc__ = method.__doc__
    return call


flow = _on_loading(Pipeline.flow)
"""``@streamsmith.flow(...)``: :meth:`Pipeline.flow` for a file a spec's ``libraries``
globs find; the flow joins the spec's pipeline, which gives its sources and may set its
sink (by default the lake table of the flow's name) and source (by default the only one)."""
