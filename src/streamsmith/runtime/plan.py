"""Resolve an app and its spec into a plan: every query with its paths and trigger.

Planning touches neither Spark nor data, so ``dry-run`` and every check a user can fail
(unknown flow, missing input, unwritable storage root) run before a JVM starts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from streamsmith.config import ConfValue, PipelineSpec, SourceSpec, Trigger, parse_trigger
from streamsmith.errors import UserError
from streamsmith.io.lake import CHECKPOINTS_DIR, backfill_path, table_path
from streamsmith.runtime.app import App, FlowDefinition
from streamsmith.transforms.quarantine import QUARANTINE_PARTITION_BY, quarantine_table

OutputKind = Literal["table", "quarantine", "topic"]


@dataclass(frozen=True)
class Output:
    """One streaming query: where a flow's accepted (or quarantined) rows land.

    ``table`` outputs write ``path`` in the lake; ``topic`` outputs write the Kafka topic
    ``table`` with ``options``. Backfills always land in the lake, at ``backfill_path``.
    """

    query_name: str
    kind: OutputKind
    table: str
    path: Path | None
    backfill_path: Path
    checkpoint: Path
    partition_by: tuple[str, ...]
    output_mode: str
    trigger: Trigger
    options: Mapping[str, ConfValue] = field(default_factory=dict)
    connector: str = "auto"


@dataclass(frozen=True)
class FlowPlan:
    """A flow with its source resolved and its outputs laid out."""

    name: str
    definition: FlowDefinition
    source_name: str
    source: SourceSpec
    source_path: Path | None
    outputs: tuple[Output, ...]


@dataclass(frozen=True)
class Plan:
    """Everything needed to run an app, without having started anything."""

    app: App
    spec: PipelineSpec
    root: Path
    flows: tuple[FlowPlan, ...]

    @property
    def outputs(self) -> tuple[Output, ...]:
        return tuple(output for flow in self.flows for output in flow.outputs)

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
    checkpoints = root / CHECKPOINTS_DIR / app.name
    flows = []
    for definition in app.flows:
        flow = spec.flows.get(definition.name)
        if flow is None:
            raise UserError(
                f"app {app.name!r} flow {definition.name!r} has no entry under 'flows' in "
                "the spec; add one with its source and sink"
            )
        if not flow.enabled:
            continue
        flow_trigger = trigger or parse_trigger(flow.trigger or spec.trigger)
        sink = flow.sink
        to_topic = sink.format == "kafka"
        outputs = [
            Output(
                query_name=f"{app.name}.{definition.name}",
                kind="topic" if to_topic else "table",
                table=sink.name,
                path=None if to_topic else table_path(root, sink.name),
                backfill_path=backfill_path(root, definition.name if to_topic else sink.name),
                checkpoint=checkpoints / definition.name,
                partition_by=sink.partition_by,
                output_mode=sink.output_mode,
                trigger=flow_trigger,
                options=spec.kafka_options(sink.options) if to_topic else {},
                connector=sink.connector,
            )
        ]
        if definition.quarantine:
            rejected = quarantine_table(definition.name if to_topic else sink.name)
            outputs.append(
                Output(
                    query_name=f"{app.name}.{definition.name}.quarantine",
                    kind="quarantine",
                    table=rejected,
                    path=table_path(root, rejected),
                    backfill_path=backfill_path(root, rejected),
                    checkpoint=checkpoints / f"{definition.name}__quarantine",
                    partition_by=QUARANTINE_PARTITION_BY,
                    output_mode="append",
                    trigger=flow_trigger,
                )
            )
        flows.append(
            FlowPlan(
                name=definition.name,
                definition=definition,
                source_name=flow.source,
                source=_with_cluster_options(spec, spec.sources[flow.source]),
                source_path=spec.source_path(flow.source),
                outputs=tuple(outputs),
            )
        )
    if not flows:
        raise UserError(f"every flow of app {app.name!r} is disabled in the spec: nothing to run")
    return Plan(app=app, spec=spec, root=root, flows=tuple(flows))


def _with_cluster_options(spec: PipelineSpec, source: SourceSpec) -> SourceSpec:
    if source.is_file_source:
        return source
    return source.model_copy(update={"options": spec.kafka_options(source.options)})


def check_inputs(plan: Plan) -> None:
    """Fail early, naming the source, when an input directory is missing."""
    for flow in plan.flows:
        if flow.source_path is not None and not flow.source_path.is_dir():
            hint = plan.app.input_hint.format(path=flow.source_path) if plan.app.input_hint else ""
            raise UserError(
                f"input directory {flow.source_path} of source {flow.source_name!r} does not "
                f"exist: create it{', ' + hint if hint else ''} or set "
                f"sources.{flow.source_name}.path"
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
    if not os.access(root, os.W_OK):
        raise UserError(f"storage root {root} is not writable: choose another with --root")


def describe_plan(plan: Plan) -> str:
    """A human-readable plan, as ``streamsmith dry-run`` prints it."""
    lines = [
        f"app {plan.app.name}: {plan.app.description}",
        f"storage root: {plan.root}",
        f"spark master: {plan.spec.spark.master}",
    ]
    for flow in plan.flows:
        source = flow.source
        limits = []
        if source.max_files_per_trigger:
            limits.append(f"maxFilesPerTrigger={source.max_files_per_trigger}")
        if source.latest_first:
            limits.append("latestFirst")
        if source.glob:
            limits.append(f"glob={source.glob}")
        lines.append(f"flow {flow.name}: {flow.definition.description}")
        if flow.source_path is None:
            options = ", ".join(f"{k}={v}" for k, v in sorted(source.options.items()))
            lines.append(
                f"  source {flow.source_name}: kafka (connector {source.connector}; {options})"
            )
        else:
            lines.append(
                f"  source {flow.source_name}: {source.format} files in {flow.source_path}"
                + (f" ({', '.join(limits)})" if limits else "")
            )
        for output in flow.outputs:
            partitions = ", ".join(output.partition_by) or "none"
            where = (
                f"kafka topic {output.table}" if output.path is None else f"parquet {output.path}"
            )
            lines.append(
                f"  {output.kind} query {output.query_name}: {where} "
                f"[{output.output_mode}, partitioned by {partitions}, trigger {output.trigger}]"
            )
            lines.append(f"    checkpoint {output.checkpoint}")
            lines.append(f"    backfill   {output.backfill_path}")
    return "\n".join(lines)
