"""Resolve an app and its spec into a plan: every query with its paths and trigger.

Planning touches neither Spark nor data, so ``dry-run`` and every check a user can fail
(unknown flow, missing input, unwritable storage root) run before a JVM starts.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pyspark.sql.types import StructType

from streamsmith.config import (
    AFTER_RUN,
    INFER,
    FlowSpec,
    PipelineSpec,
    SinkSpec,
    SourceSpec,
    Trigger,
    parse_trigger,
)
from streamsmith.errors import UserError
from streamsmith.io.delta import TableSettings
from streamsmith.io.kafka.range_cache import RANGE_CACHE, RANGE_CACHE_READERS
from streamsmith.io.lake import CHECKPOINTS_DIR, table_path
from streamsmith.io.schema_store import schema_dir
from streamsmith.io.sinks import build_sink
from streamsmith.io.sinks.base import Sink, SinkContext
from streamsmith.io.sources import source_for
from streamsmith.io.sources.base import Source
from streamsmith.io.value_formats import source_values
from streamsmith.object_store import ObjectPath
from streamsmith.runtime.app import App, EventTime, FlowDefinition, StreamInput
from streamsmith.runtime.graph import check_table_reads, dependency_order
from streamsmith.runtime.input_archive import SourceArchive, check_archive, reader_flows
from streamsmith.runtime.maintenance import (
    TableMaintenance,
    check_expiry,
    check_retention,
    plan_tables,
)
from streamsmith.runtime.outputs import (
    SINK_ROLES,
    Output,
    check_output_mode,
    check_several_sinks,
    flow_outputs,
)
from streamsmith.runtime.real_time import check_real_time
from streamsmith.runtime.views import ViewPlan, order_views, tables_read, with_flows
from streamsmith.schemas.ddl import DDLError, parse_schema
from streamsmith.transforms.events import RecordParser
from streamsmith.transforms.expectations import Expectation
from streamsmith.transforms.quarantine import NEW_FIELDS


@dataclass(frozen=True)
class StreamPlan:
    """A further streaming input of a flow with its source resolved."""

    definition: StreamInput
    source_name: str
    source: SourceSpec
    source_path: Path | None

    @property
    def input(self) -> Source:
        """What reads the source (no I/O until it is read)."""
        return source_for(self.source, self.source_path)


@dataclass(frozen=True)
class Schedule:
    """When a flow's catch-up runs start: a cron expression (UTC) and the name its runs
    are recorded under (the pipeline's name for the spec's ``schedule``, ``app.flow`` for a
    flow's own). Flows under one name run together, one run per due time."""

    name: str
    cron: str


@dataclass(frozen=True)
class FlowPlan:
    """A flow with its source resolved and its outputs laid out."""

    name: str
    definition: FlowDefinition
    source_name: str
    source: SourceSpec
    source_path: Path | None
    outputs: tuple[Output, ...]
    streams: tuple[StreamPlan, ...] = ()
    expectations: tuple[Expectation, ...] = ()
    # Where the versions of an evolving source's schema live (add_new_columns): the flow
    # reads with the newest, and a field none holds adds one (runtime.schema_change);
    # None for any other source (with fail_on_new_columns, a new field stops the flow).
    schema_store: Path | None = None
    schedule: Schedule | None = None
    maintenance: tuple[TableMaintenance, ...] = ()  # of its Delta tables (the spec's)

    @property
    def input(self) -> Source:
        """What reads the flow's source (no I/O until it is read)."""
        return source_for(self.source, self.source_path)

    @property
    def sinks(self) -> tuple[Output, ...]:
        """The queries writing the flow's output: its first sink's, then any further."""
        return tuple(output for output in self.outputs if output.role in SINK_ROLES)

    @property
    def inputs(self) -> tuple[tuple[str, Path | None], ...]:
        """Every source the flow reads, with its input directory (None for Kafka)."""
        others = ((stream.source_name, stream.source_path) for stream in self.streams)
        return ((self.source_name, self.source_path), *others)


@dataclass(frozen=True)
class Plan:
    """Everything needed to run an app, without having started anything."""

    app: App
    spec: PipelineSpec
    root: Path
    flows: tuple[FlowPlan, ...]
    warnings: tuple[str, ...] = ()
    views: tuple[ViewPlan, ...] = ()  # materialized views, in dependency order
    archives: tuple[SourceArchive, ...] = ()  # file sources moved out once read

    @property
    def outputs(self) -> tuple[Output, ...]:
        return tuple(output for flow in self.flows for output in flow.outputs)

    def upstream(self, flow: FlowPlan) -> frozenset[str]:
        """Names of the flows whose tables ``flow`` reads as a stream."""
        return _upstream(flow, self.flows)

    def downstream(self, names: set[str]) -> list[FlowPlan]:
        """The flows named and every flow reading their tables, directly or not, in
        plan (dependency) order."""
        found = set(names)
        for flow in self.flows:  # upstream flows come first
            if self.upstream(flow) & found:
                found.add(flow.name)
        return [flow for flow in self.flows if flow.name in found]

    @property
    def schedules(self) -> dict[Schedule, tuple[FlowPlan, ...]]:
        """The flows each schedule runs, in plan order (empty: nothing is scheduled)."""
        found: dict[Schedule, tuple[FlowPlan, ...]] = {}
        for flow in self.flows:
            if flow.schedule is not None:
                found[flow.schedule] = (*found.get(flow.schedule, ()), flow)
        return found

    @property
    def view_crons(self) -> dict[str, tuple[ViewPlan, ...]]:
        """The materialized views each cron refreshes: those it schedules and the views
        reading them, directly or not (in dependency order)."""
        found: dict[str, tuple[ViewPlan, ...]] = {}
        for cron in dict.fromkeys(v.schedule for v in self.views if v.schedule is not None):
            names: set[str] = set()
            for view in self.views:  # views come after those they read
                if view.schedule == cron or names & set(view.reads):
                    names.add(view.name)
            found[cron] = tuple(view for view in self.views if view.name in names)
        return found

    def views_after(self, flows: Iterable[FlowPlan]) -> tuple[ViewPlan, ...]:
        """The views reading (directly or through views) a table of ``flows``."""
        names = {flow.name for flow in flows}
        return tuple(view for view in self.views if view.flows & names)

    @property
    def stays_up(self) -> bool:
        """Whether a run of this plan stays up: a flow runs always on, or on a schedule."""
        return bool(self.schedules) or not all(o.trigger.terminates for o in self.outputs)

    @property
    def maintenance_crons(self) -> dict[str, tuple[TableMaintenance, ...]]:
        """The tables whose maintenance each cron runs (the process that stays up runs
        them: see :attr:`stays_up`)."""
        found: dict[str, tuple[TableMaintenance, ...]] = {}
        for flow in self.flows:
            for task in flow.maintenance:
                for cron in {task.optimize, task.vacuum} - {None, AFTER_RUN}:
                    assert cron is not None
                    found[cron] = (*found.get(cron, ()), task)
        return found

    def only(self, flows: tuple[FlowPlan, ...]) -> Plan:
        """This plan reduced to ``flows`` (one schedule's run, or the unscheduled flows)."""
        return replace(self, flows=flows)

    @property
    def checkpoint_dir(self) -> Path:
        """The app's checkpoints; one subfolder per query, never shared."""
        return self.root / CHECKPOINTS_DIR / self.app.name


def build_plan(app: App, spec: PipelineSpec, trigger: Trigger | None = None) -> Plan:
    """Lay out queries for every enabled flow; ``trigger`` overrides the spec's triggers."""
    declared = {flow.name for flow in app.flows}
    unknown = sorted(set(spec.flows) - declared)
    if unknown:
        raise UserError(
            f"spec flow(s) {', '.join(unknown)} are not flows of app {app.name!r} "
            f"(its flows: {', '.join(sorted(declared))}); remove them from the spec"
        )
    root = spec.root
    flows = []
    warnings: list[str] = []
    for definition in app.flows:
        if definition.name not in spec.flows:
            raise UserError(
                f"app {app.name!r} flow {definition.name!r} has no entry under 'flows' in "
                "the spec; add one with its source and sink"
            )
    app = replace(app, flows=tuple(_event_time(app.name, d, spec.flows[d.name]) for d in app.flows))
    app = _record_schemas(app, spec)
    for definition in _with_companions(app, spec):
        flow = spec.flows[definition.name]
        if not flow.enabled:
            continue
        _check_code_keys(app.name, definition, flow)
        _check_signature(app.name, definition)
        flow_trigger = trigger or parse_trigger(flow.trigger or spec.trigger)
        sinks: list[tuple[SinkSpec, Sink]] = []
        for sink_name, sink_spec in flow.named_sinks:
            context = SinkContext(spec, app.name, definition.name, sink=sink_name,
                                  further=bool(sinks))  # fmt: skip
            sink = build_sink(sink_spec.format, sink_spec.settings, context)
            warnings += check_output_mode(app.name, definition, sink_spec, sink, flow_trigger)
            sinks.append((sink_spec, sink))
        check_several_sinks(spec, definition, flow, flow_trigger)
        check_real_time(spec, definition, flow, sinks[0][1], flow_trigger)
        outputs = flow_outputs(spec, definition, sinks, flow_trigger)
        expectations = _expectations(app.name, definition, flow, outputs)
        if spec.sources[flow.source].evolution == "none":  # counted, then left out
            expectations = (*expectations, KNOWN_FIELDS)
        streams = _streams(spec, app.name, definition, flow.streams)
        lake = [
            (o.table, o.path, o.sink.table_format, o.role) for o in outputs if o.path is not None
        ]
        _check_object_store(root, definition.name, lake)
        maintenance = plan_tables(
            spec, definition.name, outputs[0].query_name, lake, flow_trigger.terminates
        )
        flows.append(
            FlowPlan(
                name=definition.name,
                definition=definition,
                source_name=flow.source,
                source=_checked_source(spec, flow.source),
                source_path=source_path(spec, flow.source),
                outputs=tuple(outputs),
                streams=streams,
                expectations=expectations,
                schema_store=_schema_store(spec, app.name, flow.source),
                schedule=None if trigger else _schedule(spec, definition.name, flow_trigger),
                maintenance=maintenance,
            )
        )
    if not flows and not app.views:
        raise UserError(f"every flow of app {app.name!r} is disabled in the spec: nothing to run")
    _check_targets(flows)
    _check_checkpoints(flows)
    flows = _in_dependency_order(flows)
    check_table_reads(spec)
    flows = _shared_reads(app.name, flows)
    views = _views(spec, flows, app)
    archives = _archives(spec, app.name, flows)
    plan = Plan(app, spec, root, tuple(flows), tuple(warnings), views, archives)
    _check_maintenance(plan)
    if plan.maintenance_crons and not plan.stays_up:
        tables = ", ".join(sorted({t.table for ts in plan.maintenance_crons.values() for t in ts}))
        warning = (
            f"the maintenance of table(s) {tables} runs on a cron, which a run that stays up "
            "(always on, or with a schedule) keeps; this catch-up runs only after_run "
            "maintenance: `streamsmith table maintain` runs the rest now"
        )
        plan = replace(plan, warnings=(*plan.warnings, warning))
    return plan


def _views(spec: PipelineSpec, flows: list[FlowPlan], app: App) -> tuple[ViewPlan, ...]:
    """The spec's materialized views and the app's, each after the views it reads, with
    the flows whose tables it reads. A pipeline with a flow always on refreshes a view
    only on its schedule, so there a view needs one."""
    writers = {o.table: f.name for f in flows for o in f.outputs if o.role == "main"}
    always_on = [f.name for f in flows if not all(o.trigger.terminates for o in f.outputs)]
    views = []
    for name, view in spec.materialized_views.items():
        at = ("materialized_views", name)
        where = f"materialized_views.{name} (in {spec.origin_of(at)})"
        if view.schedule is None and always_on:
            raise UserError(
                f"{where}: flow {always_on[0]!r} runs always on, so no catch-up run ends "
                'to refresh the view after: give it a schedule (e.g. "*/15 * * * *")'
            )
        views.append(
            ViewPlan(
                name=name,
                sql=view.sql,
                path=table_path(spec.root, name),
                reads=tables_read(view.sql, where),
                flows=frozenset(),
                schedule=view.schedule,
                partition_by=view.partition_by,
                settings=TableSettings(view.properties, view.cluster_by),
                description=view.description,
            )
        )
    for coded in app.views:
        views.append(
            ViewPlan(
                name=coded.name,
                sql="",
                path=table_path(spec.root, coded.once_into or coded.name),
                reads=coded.reads,
                flows=frozenset(),
                partition_by=coded.partition_by,
                settings=coded.settings,
                description=coded.description,
                query=coded.query,
                once=coded.once_into is not None,
            )
        )
    return tuple(with_flows(order_views(views), writers))


def _check_maintenance(plan: Plan) -> None:
    """A table's ``retain`` covers the time between two runs of each scheduled flow
    reading it as a stream (see ``streamsmith.runtime.maintenance``)."""
    for flow in plan.flows:
        for task in flow.maintenance:
            for reader in plan.flows:
                for source_name, path in reader.inputs:
                    if path != task.path:
                        continue
                    cron = reader.schedule.cron if reader.schedule is not None else None
                    check_retention(plan.spec, task, reader.name, cron)
                    check_expiry(plan.spec, task, reader.name, source_name)


def source_path(spec: PipelineSpec, name: str) -> Path | None:
    """Where source ``name`` reads: a file source's folder, a Delta table's (a table of
    the pipeline's is under the storage root's tables), None for others (Kafka)."""
    table = spec.sources[name].table
    return table_path(spec.root, table) if table is not None else spec.source_path(name)


def _upstream(flow: FlowPlan, flows: tuple[FlowPlan, ...] | list[FlowPlan]) -> frozenset[str]:
    """Names of the flows among ``flows`` whose tables ``flow`` reads as a stream."""
    paths = {path for _, path in flow.inputs if path is not None}
    return frozenset(
        other.name
        for other in flows
        if any(o.kind == "table" and o.path in paths for o in other.outputs)
    )


def _in_dependency_order(flows: list[FlowPlan]) -> list[FlowPlan]:
    """``flows``, each after the flows whose tables it reads (a cycle is an error)."""
    by_name = {flow.name: flow for flow in flows}
    upstream = {flow.name: sorted(_upstream(flow, flows)) for flow in flows}
    return [by_name[name] for name in dependency_order(upstream)]


def _schedule(spec: PipelineSpec, name: str, trigger: Trigger) -> Schedule | None:
    """The flow's own schedule, else the pipeline's (``--trigger`` drops both: one run
    now). A schedule starts catch-up runs, so the flow's trigger must be available-now."""
    flow = spec.flows[name]
    if flow.schedule is not None:
        key: tuple[str, ...] = ("flows", name, "schedule")
        schedule = Schedule(f"{spec.app}.{name}", flow.schedule)
    elif spec.schedule is not None:
        key, schedule = ("schedule",), Schedule(spec.app, spec.schedule)
    else:
        return None
    if trigger.kind != "available-now":
        trigger_key = f"flows.{name}.trigger" if flow.trigger is not None else "trigger"
        raise UserError(
            f"{'.'.join(key)} (in {spec.origin_of(key)}) starts scheduled catch-up runs, "
            f"which need trigger available-now, but flow {name!r} has trigger {trigger}: "
            f"set {trigger_key} to available-now, or remove the schedule"
        )
    return schedule


def _with_companions(app: App, spec: PipelineSpec) -> list[FlowDefinition]:
    """The app's flows, where a flow whose sibling quarantines (or records the late
    events of) the same events for it takes that over when the sibling is disabled.

    Flows over one source with the same ``prepare`` see the same events, so an app lets
    one of them keep the quarantine and late-events tables for all (``quarantine=False``
    on the others). With that one switched off in the spec, the first enabled sibling
    keeps them instead: bad and late records are never dropped unrecorded.
    """

    def siblings(definition: FlowDefinition) -> list[FlowDefinition]:
        source = spec.flows[definition.name].source
        return [
            other
            for other in app.flows
            if other.prepare is not None
            and other.prepare == definition.prepare
            and spec.flows[other.name].source == source
        ]

    def enabled(definition: FlowDefinition) -> bool:
        return spec.flows[definition.name].enabled

    adopted = []
    for definition in app.flows:
        group = siblings(definition) if definition.prepare is not None else []
        live = [other for other in group if enabled(other)]
        first_live = bool(live) and live[0] is definition
        quarantine = definition.quarantine or (
            first_live and any(o.quarantine for o in group) and not any(o.quarantine for o in live)
        )
        same_rule = [o for o in group if o.event_time == definition.event_time]
        live_rule = [o for o in same_rule if enabled(o)]
        record_late = definition.record_late or (
            bool(live_rule)
            and live_rule[0] is definition
            and definition.event_time is not None
            and any(o.record_late for o in same_rule)
            and not any(o.record_late for o in live_rule)
        )
        adopted.append(replace(definition, quarantine=quarantine, record_late=record_late))
    return adopted


def _streams(
    spec: PipelineSpec, app: str, definition: FlowDefinition, configured: Mapping[str, str]
) -> tuple[StreamPlan, ...]:
    """The flow's further streaming inputs, each fed by the source the spec names."""
    wanted = {stream.name for stream in definition.streams}
    where = f"flow {definition.name!r} of app {app!r}"
    unknown = sorted(set(configured) - wanted)
    if unknown:
        raise UserError(
            f"{where} has no stream input(s) {', '.join(unknown)}"
            + (f" (its inputs: {', '.join(sorted(wanted))})" if wanted else "")
        )
    missing = sorted(wanted - set(configured))
    if missing:
        raise UserError(
            f"{where} joins stream(s) {', '.join(missing)}: name their sources under "
            f"flows.{definition.name}.streams"
        )
    return tuple(
        StreamPlan(
            definition=stream,
            source_name=configured[stream.name],
            source=_checked_source(spec, configured[stream.name]),
            source_path=source_path(spec, configured[stream.name]),
        )
        for stream in definition.streams
    )


def _check_code_keys(app: str, definition: FlowDefinition, flow: FlowSpec) -> None:
    """A flow declared in code fixes its transform: the spec keys that would name
    another would be ignored, so they are errors."""
    if definition.from_spec:
        return
    given = [key for key in ("transform", "sql") if getattr(flow, key) is not None]
    if given:
        keys = ", ".join(f"flows.{definition.name}.{key}" for key in given)
        raise UserError(
            f"app {app!r} declares its flows' code itself: remove {keys} (a pipeline whose "
            "spec names its code: see `streamsmith init`)"
        )


def _check_signature(app: str, definition: FlowDefinition) -> None:
    """The flow's function takes its events and the keyword arguments the runtime will
    pass (lookups, streams, models, event time; batch arguments in backfills)."""
    given = [*definition.lookups, *(stream.name for stream in definition.streams)]
    given += ["models"] * bool(definition.models) + ["event_time"] * definition.applies_event_time
    try:
        signature = inspect.signature(definition.transform)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check
        return
    for extra in ({}, definition.batch_arguments):
        try:
            signature.bind(None, **dict.fromkeys(given), **extra)
        except TypeError as exc:
            takes = ", ".join([*given, *extra]) or "nothing else"
            raise UserError(
                f"flow {definition.name!r} of app {app!r}: its function "
                f"{getattr(definition.transform, '__qualname__', definition.transform)!r} "
                f"must take the events and, by keyword, {takes}: {exc}"
            ) from None


def _event_time(app: str, definition: FlowDefinition, flow: FlowSpec) -> FlowDefinition:
    """The flow with its event time resolved: the code's rule, with whatever the spec's
    ``flows.<flow>.event_time`` sets over it (the whole rule when the code has none).
    A declared window makes the flow an aggregation."""
    given = flow.event_time
    if given is None:
        return definition
    where = f"flows.{definition.name}.event_time of app {app!r}"
    values = given.model_dump(exclude_none=True)
    try:
        if definition.event_time is not None:
            rule = definition.event_time.merged(**values)
        else:
            missing = [key for key in ("column", "lateness") if key not in values]
            if missing:
                raise UserError(f"set {' and '.join(missing)}: the flow's code declares none")
            rule = EventTime(**values)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    if rule.gap is not None and not definition.applies_event_time:
        raise UserError(
            f"{where}: gap is read by a flow that keeps sessions itself (its transform takes "
            "event_time); in a query, group by session_window(column, gap) instead"
        )
    stateful = definition.stateful or rule.window is not None
    return replace(definition, event_time=rule, stateful=stateful)


def _schema_store(spec: PipelineSpec, app: str, source: str) -> Path | None:
    """Where the flow's source keeps its schema versions, when new fields add to them."""
    if spec.sources[source].evolution == "add_new_columns":
        return schema_dir(spec.root, app, source)
    return None


def _record_schemas(app: App, spec: PipelineSpec) -> App:
    """The app with each source's ``schema`` from a spec file or ``--set`` applied to the
    flows (and further streams) that parse that source with the default parser; a flow
    whose code parses its records itself cannot take it, so that is an error, never a
    schema silently left unread."""
    given: dict[str, StructType] = {}
    keys: dict[str, str] = {}  # the key that gave each source's schema
    for name, declared in spec.sources.items():
        if declared.binary_values and declared.value_schema is not None:
            # Binary values are decoded by their schema file whoever declared the flow:
            # a flow that took them unparsed would see a malformed value as null fields.
            at = ("sources", name, "value_schema")
            where = f"sources.{name}.value_schema (in {spec.origin_of(at)})"
            given[name] = source_values(declared, where).struct
            keys[name] = "value_schema"
            continue
        at = ("sources", name, "schema")
        keys[name] = "schema"
        if declared.record_schema is None or spec.layer_of(at) < 0:
            continue
        code_flows = [
            d.name for d in app.flows if not d.from_spec and spec.flows[d.name].source == name
        ]
        if declared.record_schema == INFER:
            if code_flows:
                raise UserError(
                    f"sources.{name}.schema (in {spec.origin_of(at)}): infer is for flows a "
                    f"spec names the code of; flow {code_flows[0]!r} of app {app.name!r} "
                    "declares its own: give the schema as DDL"
                )
            continue
        try:
            given[name] = parse_schema(declared.record_schema)
        except DDLError as exc:
            raise UserError(f"sources.{name}.schema (in {spec.origin_of(at)}): {exc}") from None

    def reparsed(parser: Any, source: str, who: str) -> tuple[Any, StructType | None]:
        schema = given[source]
        at = ("sources", source, keys[source])
        if parser is None and keys[source] == "value_schema":
            return RecordParser(schema), schema  # the decoding is checked, never skipped
        if not isinstance(parser, RecordParser):
            how = "takes its records unparsed" if parser is None else "parses its records itself"
            raise UserError(
                f"{'.'.join(at)} (in {spec.origin_of(at)}): "
                f"{who} of app {app.name!r} {how}, reading no schema from the spec; "
                "remove the key"
            )
        missing = [f for f in parser.required if f not in schema.fieldNames()]
        if missing:
            raise UserError(
                f"{'.'.join(at)} (in {spec.origin_of(at)}): "
                f"{who} needs field(s) {', '.join(missing)}, which the schema lacks"
            )
        return replace(parser, schema=schema), schema

    flows = []
    for definition in app.flows:
        flow = spec.flows[definition.name]
        changes: dict[str, Any] = {}
        if flow.source in given and not definition.from_spec:
            who = f"flow {definition.name!r}"
            changes["prepare"], changes["record_schema"] = reparsed(
                definition.prepare, flow.source, who
            )
        streams = []
        for stream in definition.streams:
            source = flow.streams.get(stream.name, "")
            if source in given and stream.record_schema is not None:
                who = f"stream {stream.name!r} of flow {definition.name!r}"
                prepare, schema = reparsed(stream.prepare, source, who)
                streams.append(replace(stream, prepare=prepare, record_schema=schema))
            else:
                streams.append(stream)
        flows.append(replace(definition, streams=tuple(streams), **changes))
    return replace(app, flows=tuple(flows))


# schema_evolution: none counts the records holding fields their schema lacks, as an
# expectation that only warns: the counts reach the event log, status and metrics.
KNOWN_FIELDS = Expectation("known_fields", f"{NEW_FIELDS} IS NULL", "warn")


def _expectations(
    app: str, definition: FlowDefinition, flow: FlowSpec, outputs: list[Output]
) -> tuple[Expectation, ...]:
    """The flow's expectations: its code's, then the spec's (which may replace one of the
    same name). A ``quarantine`` one needs the flow to keep a quarantine table."""
    merged = {e.name: e for e in definition.expectations}
    merged.update(
        (name, Expectation(name, rule.sql, rule.action)) for name, rule in flow.expect.items()
    )
    quarantined = [e.name for e in merged.values() if e.action == "quarantine"]
    keeps = any(o.role == "quarantine" for o in outputs)
    if quarantined and not keeps:
        raise UserError(
            f"flow {definition.name!r} of app {app!r}: expectation(s) {', '.join(quarantined)} "
            "quarantine records, but this flow keeps no quarantine table (a sibling flow "
            "over the same events does): use drop, warn or fail"
        )
    return tuple(merged.values())


def _check_targets(flows: list[FlowPlan]) -> None:
    """Each sink writes its own table or topic, but that several flows may append to one
    Delta table (each batch its own commit, as SDP's append flows do)."""
    written: dict[str, str] = {}
    appended: set[str] = set()
    for flow in flows:
        for output in flow.sinks:
            target = f"{output.sink.format} {output.sink.target!r}"
            writer = flow.name if output.name is None else f"{flow.name} (sink {output.name})"
            appends = output.sink.format == "delta" and output.output_mode == "append"
            if appends and flow.definition.appends_with_others:
                if target in written and target not in appended:
                    raise UserError(
                        f"flows {written[target]!r} and {writer!r} both write {target}; "
                        "several flows may write one table only by appending to it"
                    )
                appended.add(target)
                written.setdefault(target, writer)
                continue
            if target in written:
                raise UserError(
                    f"flows {written[target]!r} and {writer!r} both write {target}; "
                    "each sink needs its own table or topic"
                )
            written[target] = writer


def _check_checkpoints(flows: list[FlowPlan]) -> None:
    """No two queries share a checkpoint (a flow ``a`` with a sink ``b`` and a flow
    named ``a__b`` would)."""
    seen: dict[Path, str] = {}
    for output in (output for flow in flows for output in flow.outputs):
        other = seen.setdefault(output.checkpoint, output.query_name)
        if other != output.query_name:
            raise UserError(
                f"queries {other} and {output.query_name} would share the checkpoint "
                f"{output.checkpoint}: rename the flow or the sink"
            )


def _checked_source(spec: PipelineSpec, name: str) -> SourceSpec:
    """Source ``name`` as it is read (a Kafka source's options over the pipeline's Kafka
    block), its format known and its plug-in options checked."""
    source = spec.sources[name]
    if source.format == "kafka":
        source = source.model_copy(update={"options": spec.kafka_options(source.options)})
    try:
        source_for(source, source_path(spec, name)).check(name)
    except UserError as exc:
        at = ("sources", name, "format")
        raise UserError(f"in {spec.origin_of(at)}: {exc}") from None
    check_archive(spec, name)
    archive = spec.archive_path(name)  # absolute, for backfill's reads
    return source.model_copy(update={"archive": str(archive)}) if archive else source


def _archives(spec: PipelineSpec, app: str, flows: list[FlowPlan]) -> tuple[SourceArchive, ...]:
    """The file sources that archive what they read, each with the checkpoints of the
    queries reading it: every query of a planned flow, and the table query of a disabled
    one once it has run (``streamsmith.runtime.input_archive``)."""
    found = []
    planned = {flow.name for flow in flows}
    for name in spec.sources:
        path, archive = spec.source_path(name), spec.archive_path(name)
        if path is None or archive is None:
            continue
        readers = [o.checkpoint for f in flows if name in dict(f.inputs) for o in f.outputs]
        paused = [spec.root / CHECKPOINTS_DIR / app / flow
                  for flow in reader_flows(spec, name) if flow not in planned]  # fmt: skip
        found.append(SourceArchive(name, path, archive, tuple(readers), tuple(paused)))
    return tuple(found)


def is_side_query(flow: FlowPlan, output: Output) -> bool:
    """Whether ``output`` is a side query of a one-source flow: its quarantine or late
    events, which skip the batches that hold nothing for them
    (``streamsmith.runtime.flow_batches``)."""
    return output.role not in SINK_ROLES and not flow.streams


def _shared_reads(app: str, flows: list[FlowPlan]) -> list[FlowPlan]:
    """In catch-up runs, let every query that reads a Kafka source consume each range
    once (streamsmith's connector; see ``streamsmith.io.kafka.range_cache``), unless the
    spec says otherwise. Side queries (:func:`is_side_query`) read shared ranges without
    counting as readers, since they may skip their batches.

    Not in always-on runs: there the queries' batches must follow one plan to share
    ranges, which holds every query to the pace of the fastest planner's small batches,
    and a slower query, paying its fixed cost per batch, falls ever further behind
    (seen with ``benchmarks/ysb_latency.py``).
    """
    readers: dict[str, int] = {}
    always_on: set[str] = set()
    for flow in flows:
        counted = [o for o in flow.outputs if not is_side_query(flow, o)]
        readers[flow.source_name] = readers.get(flow.source_name, 0) + len(counted)
        if not all(output.trigger.terminates for output in flow.outputs):
            always_on.add(flow.source_name)
    shared = []
    for flow in flows:
        source = flow.source
        own = any(key.lower().startswith("rangecache") for key in source.options)
        alone = readers[flow.source_name] < 2 or flow.source_name in always_on
        if source.format != "kafka" or own or alone:  # a Delta table read by two: not shared
            shared.append(flow)
            continue
        options = {
            **source.options,
            RANGE_CACHE: f"{app}.{flow.source_name}",
            RANGE_CACHE_READERS: readers[flow.source_name],
        }
        shared.append(replace(flow, source=source.model_copy(update={"options": options})))
    return shared


def check_inputs(plan: Plan) -> None:
    """Fail early, naming the source, when an input directory is missing."""
    produced = {output.path for output in plan.outputs if output.kind == "table"}
    for flow in plan.flows:
        for source_name, path in flow.inputs:
            if path in produced:  # another flow's table: it exists once that flow starts
                continue
            spec = plan.spec.sources[source_name]
            missing = source_for(spec, path).missing_input()
            if missing is not None:
                hint = plan.app.input_hint.format(path=path) if plan.app.input_hint else ""
                raise UserError(
                    f"{missing} of source {source_name!r} does not "
                    f"exist: create it{', ' + hint if hint else ''} or set "
                    f"sources.{source_name}.path"
                )


def _check_object_store(root: Path, flow: str, lake: Iterable[tuple[str, Path, str, str]]) -> None:
    """A Parquet table is written with local renames (a batch's files moved in whole, a
    replay replacing them): on S3, where a rename is a copy, only Delta's log keeps a
    batch whole, so a root on S3 takes Delta tables only."""
    if not isinstance(root, ObjectPath):
        return
    for table, _, table_format, _ in lake:
        if table_format != "delta":
            raise UserError(
                f"flow {flow!r} writes table {table!r} as {table_format} on "
                f"the S3 storage root {root}: tables on object storage are Delta "
                "(remove format: parquet)"
            )


def check_storage_root(root: Path) -> None:
    """Fail early when the storage root cannot be created or written."""
    probe = root / ".streamsmith-write-probe"
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe.write_text("ok", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UserError(
            f"storage root {root} is not writable ({reason}): choose another with --root "
            "or storage_root in the spec"
        ) from None
    if not isinstance(root, ObjectPath) and not os.access(root, os.W_OK):
        raise UserError(f"storage root {root} is not writable: choose another with --root")
