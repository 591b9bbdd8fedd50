"""A flow's frames: its source read, parsed and transformed, streaming or batch.

Both modes call the same source reader and the same transform; only the edges differ
(``readStream`` versus ``read``), which is what makes the streaming output a prefix of
the batch output over the same input. What differs between the two is decided here, at
the edge: transforms never ask whether their input is a stream.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from streamsmith.config import STOPPING
from streamsmith.io.kafka.range_cache import RANGE_CACHE, RANGE_CACHE_COUNTED
from streamsmith.io.lake import model_path, read_table, table_path
from streamsmith.runtime.app import FlowDefinition
from streamsmith.runtime.flow_batches import observe_flow
from streamsmith.runtime.outputs import Output
from streamsmith.runtime.plan import FlowPlan, is_side_query
from streamsmith.runtime.schema_change import with_current_schema
from streamsmith.transforms.events import stop_on_new_fields, with_event_time
from streamsmith.transforms.expectations import (
    Expectation,
    check_expectations,
    counted,
    enforced,
    quarantine_failures,
)
from streamsmith.transforms.quarantine import (
    NEW_FIELDS,
    POSITION,
    RAW_TEXT,
    RECORD,
    REJECT_REASON,
    SOURCE_FILE,
    accepted,
    quarantined,
)


@dataclass(frozen=True)
class FlowFrames:
    """A flow's frames over one read of its source: the output, and the tagged events
    its quarantine and late-events companions take (None when it has no ``prepare``)."""

    output: DataFrame
    tagged: DataFrame | None
    expectations: tuple[Expectation, ...] = ()
    tables: Mapping[str, DataFrame] = field(default_factory=dict)  # the lookups read
    # A batch job's counts of its expectations (a stream's are in its progress).
    judged: Observation | None = None
    counts: bool = True  # whether the frames observe the flow's counts (see flow_frames)


def flow_frames(
    spark: SparkSession,
    flow: FlowPlan,
    root: Path,
    *,
    streaming: bool,
    tables: Mapping[str, DataFrame] | None = None,
    counts: bool = True,
) -> FlowFrames:
    """The flow's transformed frames over its source (and lookup tables, unless
    ``tables`` holds them already read), streaming or batch. Without ``counts`` nothing
    is observed (expectations, rejects, records read): for a flow's further sinks,
    whose queries would count again what its main query counts."""
    definition = flow.definition
    source = flow.input.read(spark, definition.record_schema, streaming=streaming)
    if tables is None:
        tables = {name: read_table(spark, table_path(root, name)) for name in definition.lookups}
    inputs: dict[str, Any] = dict(tables)
    if definition.models:
        inputs["models"] = {name: str(model_path(root, name)) for name in definition.models}
    if not streaming:
        inputs.update(definition.batch_arguments)
    for stream in flow.streams:
        other = stream.input.read(spark, stream.definition.record_schema, streaming=streaming)
        inputs[stream.definition.name] = _accepted(stream.definition.prepare(other))
    expectations = flow.expectations
    judged = None if streaming or not expectations else Observation()
    watched = expectations if counts else ()
    if definition.prepare is None:  # the source whole, but for what only parsers use
        output = _transformed(definition, source.drop(RAW_TEXT, RECORD), inputs)
        if not expectations:
            return FlowFrames(output, None, tables=tables, counts=counts)
        check_expectations(output, expectations)
        if REJECT_REASON not in output.columns:  # nothing is rejected before the rules
            output = output.withColumn(REJECT_REASON, F.lit(None).cast("string"))
        main = quarantine_failures(counted(output, watched, _valid(), judged), expectations)
        return FlowFrames(
            enforced(accepted(main), expectations),
            quarantine_failures(output, expectations),
            expectations,
            tables,
            judged,
            counts,
        )
    prepare = (
        with_current_schema(definition.prepare, flow.schema_store)
        if flow.schema_store is not None
        else definition.prepare
    )
    assert prepare is not None
    parsed = prepare(source)
    check_expectations(parsed, expectations)
    tagged = quarantine_failures(parsed, expectations)
    main = quarantine_failures(counted(parsed, watched, _valid(), judged), expectations)
    # The main query reports the records it read and its rejects per batch, and with
    # side queries its oldest event time, so those can skip the batches that hold
    # nothing for them. Counting every record read keeps Spark from pushing the
    # transform's filters into a JSON reader (Spark's own input rows would count only
    # what passes them), the price of counts that reconcile (benchmarks/ysb_stages.py).
    rule = definition.event_time
    sides = any(is_side_query(flow, o) for o in flow.outputs)
    late_time = rule.column if rule is not None and definition.record_late and sides else None
    # It carries a batch's few rejects to the quarantine where the reader keeps their raw
    # payload cheaply (files: ``deferred_raw``; a Kafka read is pruned to what it uses);
    # a real-time flow's quarantine query reads its every batch (its dead letters).
    carry = any(o.role == "quarantine" and not o.trigger.real_time for o in flow.outputs)
    if counts and streaming:
        main = observe_flow(main, late_time, carry_rejects=carry)
    if flow.source.evolution in STOPPING:  # a field the schema lacks stops the batch
        fitting = stop_on_new_fields(accepted(main, keep=(NEW_FIELDS,))).drop(NEW_FIELDS)
    else:
        fitting = _accepted(main)
    events = enforced(fitting, expectations)
    output = _transformed(definition, events, inputs)
    return FlowFrames(output, tagged, expectations, tables, judged, counts)


def _transformed(
    definition: FlowDefinition, events: DataFrame, inputs: dict[str, Any]
) -> DataFrame:
    """The flow's code over its events. A transform that takes ``event_time`` gets the
    flow's resolved rule and applies it itself; any other gets the events watermarked,
    with the declared window as a ``window`` column (the edge applies the rule)."""
    rule = definition.event_time
    if definition.applies_event_time:
        return definition.transform(events, event_time=rule, **inputs)
    if rule is not None:
        events = with_event_time(events, rule.column, rule.lateness, rule.window, rule.slide)
    return definition.transform(events, **inputs)


def _valid() -> Column:
    """Records the expectations judge: those read and parsed (not already rejected)."""
    return F.col(REJECT_REASON).isNull()


def _accepted(tagged: DataFrame) -> DataFrame:
    return accepted(tagged) if REJECT_REASON in tagged.columns else tagged


def output_frame(frames: FlowFrames, output: Output) -> DataFrame:
    """The part of a flow's frames that goes to ``output``."""
    tagged = frames.tagged if frames.tagged is not None else frames.output
    if output.role == "quarantine":
        return quarantined(tagged)
    if output.role == "late":  # lineage lines late events up with the flow's batches
        if REJECT_REASON not in tagged.columns:
            return tagged
        # What the flow drops by its expectations never reaches its watermark: not late.
        return enforced(accepted(tagged, keep=(SOURCE_FILE, POSITION)), frames.expectations)
    return _accepted(frames.output)


def query_frame(
    spark: SparkSession,
    flow: FlowPlan,
    output: Output,
    root: Path,
    frames: FlowFrames | None = None,
) -> DataFrame:
    """What the streaming query of ``output`` writes: its part of the flow's ``frames``
    (one read of the source for all of the flow's queries), or of a read of its own."""
    if is_side_query(flow, output) and RANGE_CACHE in flow.source.options:
        # A side query may skip batches, so it reads shared Kafka ranges uncounted.
        options = {**flow.source.options, RANGE_CACHE_COUNTED: False}
        flow = replace(flow, source=flow.source.model_copy(update={"options": options}))
        frames = None
    if frames is None or (output.role == "sink" and frames.counts):
        tables = frames.tables if frames is not None else None
        counts = output.role != "sink"  # the main query counts for every sink of the flow
        frames = flow_frames(spark, flow, root, streaming=True, tables=tables, counts=counts)
    return output_frame(frames, output)
