"""A flow's queries: its main output, further sinks and side queries, each with its sink,
checkpoint and trigger, and the output-mode checks made before a JVM starts.

Pure planning, like ``streamsmith.runtime.plan``, which lays out every flow with these.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from streamsmith.config import FlowSpec, PipelineSpec, SinkSpec, Trigger, parse_duration
from streamsmith.errors import UserError
from streamsmith.io.lake import CHECKPOINTS_DIR, backfill_path
from streamsmith.io.sinks.base import OutputMode, Sink
from streamsmith.io.sinks.kafka import KafkaTopicSink
from streamsmith.io.sources import source_class
from streamsmith.runtime.app import FlowDefinition
from streamsmith.runtime.late import late_table
from streamsmith.runtime.side_sinks import (
    DeadLetterQuarantine,
    LateEventsSink,
    MainQuery,
    QuarantineSink,
)
from streamsmith.transforms.quarantine import quarantine_table

Role = Literal["main", "sink", "quarantine", "late"]
# The roles of the queries that write a flow's output (the others are side queries).
SINK_ROLES: tuple[Role, ...] = ("main", "sink")


@dataclass(frozen=True)
class Output:
    """One streaming query of a flow: its sink, checkpoint and trigger.

    ``role`` is ``main`` for the flow's own output (its first sink, whose query counts
    its expectations and which its side queries follow), ``sink`` for each further sink
    of a flow with several, ``quarantine`` or ``late`` for its side queries. ``name`` is
    the sink's name under ``flows.<flow>.sinks`` (None for ``sink`` and side queries).
    Backfills always land in the lake, at ``backfill_path``.
    """

    query_name: str
    role: Role
    sink: Sink
    backfill_path: Path
    checkpoint: Path
    output_mode: OutputMode
    trigger: Trigger
    name: str | None = None

    @property
    def kind(self) -> str:
        """The sink's kind: ``table``, ``quarantine``, ``late``, ``topic``, ``postgres``..."""
        return self.sink.kind

    @property
    def table(self) -> str:
        """The table or topic written."""
        return self.sink.target

    @property
    def path(self) -> Path | None:
        """The lake folder written, if any."""
        return self.sink.lake_path

    @property
    def partition_by(self) -> tuple[str, ...]:
        return self.sink.partition_by

    @property
    def spark_name(self) -> str:
        """The name Spark knows the query by: a memory sink's is its table's name."""
        return self.sink.spark_name or self.query_name


def check_several_sinks(
    spec: PipelineSpec, definition: FlowDefinition, flow: FlowSpec, trigger: Trigger
) -> None:
    """Refuse several sinks where they cannot run: a cdc flow applies its changes to its
    one Delta table, and a real-time flow reads its source once, in one query."""
    if len(flow.named_sinks) < 2:
        return
    where = f"flow {definition.name!r} of app {spec.app!r} has {len(flow.named_sinks)} sinks"
    if flow.cdc is not None:
        raise UserError(
            f"{where}, but a cdc flow applies its changes to one delta table: give it one sink"
        )
    if trigger.real_time:
        raise UserError(
            f"{where}, but trigger {trigger} runs a flow as one query (Real-time Mode "
            "holds a task per Kafka partition for each query): give it one sink, or use "
            "interval=<duration>"
        )


def flow_outputs(
    spec: PipelineSpec,
    definition: FlowDefinition,
    sinks: list[tuple[SinkSpec, Sink]],
    trigger: Trigger,
) -> list[Output]:
    """The flow's main output (its first sink), its further sinks, then its quarantine
    and late-events companions."""
    root = spec.root
    (first_spec, sink), further = sinks[0], sinks[1:]
    context = sink.context
    checkpoints = root / CHECKPOINTS_DIR / context.app
    # Companion tables are named after the table written, or the flow for a topic.
    base = sink.target if sink.writes_table else definition.name
    main = Output(
        query_name=context.query_name,
        role="main",
        sink=sink,
        backfill_path=backfill_path(root, base),
        checkpoint=checkpoints / definition.name,
        output_mode=first_spec.output_mode,
        trigger=trigger,
        name=context.sink,
    )
    others = []
    backfills = {main.backfill_path}
    for sink_spec, other in further:
        name = str(other.context.sink)
        own = f"{definition.name}__{name}"
        folder = backfill_path(root, other.target if other.writes_table else own)
        if folder in backfills:  # e.g. a PostgreSQL table and a Delta table of one name
            folder = backfill_path(root, f"{folder.name}__{name}")
        backfills.add(folder)
        others.append(
            Output(
                query_name=other.context.query_name,
                role="sink",
                sink=other,
                backfill_path=folder,
                checkpoint=checkpoints / own,
                output_mode=sink_spec.output_mode,
                trigger=trigger,
                name=name,
            )
        )
    if trigger.real_time:
        # Spark runs real-time queries in update mode only: for a stateless query, the
        # same rows as append; and a stateless query's watermark drops nothing, so no
        # events are late.
        return [replace(main, output_mode="update"), *_dead_letters(spec, definition, main)]
    query = _main_query(spec, definition, main)
    companions: list[tuple[Role, Sink]] = []
    if definition.quarantine:
        quarantine = QuarantineSink(quarantine_table(base), context, query, sink.table_format)
        companions.append(("quarantine", quarantine))
    if definition.event_time is not None and definition.record_late:
        rule = definition.event_time
        late = LateEventsSink(late_table(base), context, query, sink.table_format, rule)
        companions.append(("late", late))
    side_trigger = trigger  # catch-up runs, and flows asked to run as fast as possible
    if not trigger.terminates and trigger.interval_seconds > 0:
        slowest = max(trigger.interval_seconds, parse_duration(spec.side_interval))
        side_trigger = Trigger("interval", slowest)
    outputs = [main, *others]
    for role, companion in companions:
        outputs.append(
            Output(
                query_name=f"{context.app}.{definition.name}.{role}",
                role=role,
                sink=companion,
                backfill_path=backfill_path(root, companion.target),
                checkpoint=checkpoints / f"{definition.name}__{role}",
                output_mode="append",
                trigger=side_trigger,
            )
        )
    return outputs


def _dead_letters(spec: PipelineSpec, definition: FlowDefinition, main: Output) -> list[Output]:
    """A real-time flow's quarantine: a micro-batch query at the side queries' interval
    that follows the flow's query (``DeadLetterQuarantine``) and sends each rejected
    record to the sink's dead-letter topic. In the flow's own query the rejects would
    need a second read of the source (Spark refuses a union of one read's two branches
    in Real-time Mode), which tripled its planning at every checkpoint
    (benchmarks/ysb_latency.py --stateless)."""
    if not definition.quarantine or not isinstance(main.sink, KafkaTopicSink):
        return []  # a real-time flow writes to Kafka (check_real_time)
    sink = DeadLetterQuarantine(main.sink.dead_letter_sink(), _main_query(spec, definition, main))
    return [
        Output(
            query_name=f"{main.sink.context.app}.{definition.name}.quarantine",
            role="quarantine",
            sink=sink,
            backfill_path=backfill_path(spec.root, quarantine_table(definition.name)),
            checkpoint=main.checkpoint.with_name(f"{definition.name}__quarantine"),
            output_mode="append",
            trigger=Trigger("interval", parse_duration(spec.side_interval)),
        )
    ]


def _main_query(spec: PipelineSpec, definition: FlowDefinition, main: Output) -> MainQuery:
    """What the flow's side queries know of its main query: they follow its checkpoint."""
    flow = spec.flows[definition.name]
    return MainQuery(
        checkpoint=main.checkpoint,
        spark_name=main.spark_name,
        source=None if flow.streams else source_class(spec.sources[flow.source].format).lineage,
        prepared=definition.prepare is not None,
    )


def check_output_mode(
    app: str, definition: FlowDefinition, flow_sink: SinkSpec, sink: Sink, trigger: Trigger
) -> list[str]:
    """Reject output modes Spark or the sink cannot run, before a JVM starts; return
    warnings for combinations that run but cost (state that grows without bound)."""
    named = f" (sink {sink.context.sink})" if sink.context.sink is not None else ""
    where = f"flow {definition.name!r}{named} of app {app!r}"
    mode = flow_sink.output_mode
    if mode not in sink.output_modes:
        raise UserError(
            f"{where}: a {sink.format} sink takes output mode "
            f"{' or '.join(sink.output_modes)}, not {mode}; write {mode} results to "
            "delta (with keys), postgres, kafka or memory, or use append"
        )
    refused = sink.refuses_mode(mode)
    if refused:
        raise UserError(f"{where}: {refused}")
    if sink.context.cdc is not None and not sink.applies_changes:
        raise UserError(
            f"{where}: a cdc flow's change events are applied by key to a delta table: "
            f"set sink.format: delta (not {sink.format})"
        )
    rule = definition.event_time
    if definition.stateful:
        if mode == "append" and rule is None:
            raise UserError(
                f"{where}: append mode on an aggregation needs a watermark, since a row is "
                "appended only once its window can no longer change; use update or complete "
                "mode, or give the flow an event-time watermark"
            )
    elif mode == "complete":
        raise UserError(
            f"{where}: complete mode rewrites the whole result every batch and needs an "
            "aggregation; this flow emits rows as they come: use append"
        )
    if not definition.stateful or trigger.terminates:
        return []
    if rule is None:
        return [
            f"{where} aggregates without a watermark in an always-on run: its state keeps "
            "every group forever and grows with the number of distinct keys"
        ]
    if mode == "complete" and rule.window:
        return [
            f"{where} runs in complete mode: Spark keeps every window in state despite "
            f"the {rule.lateness} watermark, so state grows by one row per key and window"
        ]
    return []
