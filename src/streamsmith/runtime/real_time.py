"""Which flows Spark 4.2 can run in Real-time Mode, decided when the plan is built.

Spark checks a real-time query only once it starts (and some checks only in its first
batch, after the JVM and the broker are up); ``dry-run`` answers before either, from
what the spec and the flow's declaration say. What they cannot say (a Python UDF in a
transform, say) Spark still refuses at start, naming the operator.

Spark 4.2 runs in Real-time Mode: stateless queries (projections, filters, explode,
unions of different sources, broadcast joins with static tables, a watermark) from
Spark's Kafka connector to a Kafka sink, in update mode. Aggregations, windows,
``dropDuplicates`` and ``transformWithState`` need Spark 4.3; stream-stream joins, file
sources, ``foreachBatch`` sinks (PostgreSQL, the lake, webhooks) and Python data sources
(streamsmith's Kafka connector) are refused, and so are Protobuf values: they are
decoded and encoded in Python with ``mapInArrow``, an operator (PythonMapInArrowExec)
not in Spark's Real-time Mode allowlist. A real-time flow's rejects go to its sink's
dead-letter topic, written by a micro-batch query of their own (``runtime.outputs``).
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from streamsmith.config import FlowSpec, PipelineSpec, SourceSpec, Trigger, parse_duration
from streamsmith.errors import UserError
from streamsmith.io.sinks.base import Sink
from streamsmith.runtime.app import FlowDefinition

MIN_BATCH_DURATION = "spark.sql.streaming.realTimeMode.minBatchDuration"
SPARK_MIN_BATCH_MS = 5000  # Spark's default for MIN_BATCH_DURATION
# Options Spark's Kafka source refuses in Real-time Mode (it reads every offset as it
# comes, one long-running task per topic-partition), and those only streamsmith's own
# Kafka connector reads.
_BATCH_ONLY_OPTIONS = ("minpartitions", "maxoffsetspertrigger")
_PYTHON_CONNECTOR_OPTIONS = ("valueformat", "valueschema", "columns")
_SUBSCRIPTIONS = ("subscribe", "subscribepattern", "assign")


def check_real_time(
    spec: PipelineSpec, definition: FlowDefinition, flow: FlowSpec, sink: Sink, trigger: Trigger
) -> None:
    """Refuse, in one line naming the operator, source or sink, a flow Spark cannot run
    with ``trigger`` in Real-time Mode; nothing for any other trigger."""
    if not trigger.real_time:
        return
    where = f"flow {definition.name!r} of app {spec.app!r} has trigger {trigger}, but"
    refusal = (
        _refused_code(definition, flow)
        or _refused_source(flow.source, spec.sources[flow.source])
        or _refused_sink(sink, flow.main_sink.output_mode)
        or _refused_interval(spec, trigger)
    )
    if refusal:
        raise UserError(f"{where} {refusal}")


def _refused_code(definition: FlowDefinition, flow: FlowSpec) -> str | None:
    rule = definition.event_time
    if definition.stateful or (rule is not None and (rule.window or rule.gap)):
        return (
            "it aggregates (a stateful operator: aggregation, window, dropDuplicates or "
            "transformWithState), which Spark runs in Real-time Mode only from 4.3; "
            "streamsmith pins 4.2: use interval=<duration>"
        )
    if definition.streams or flow.streams:
        names = ", ".join(s.name for s in definition.streams) or ", ".join(flow.streams)
        return (
            f"it joins further streams ({names}): a stream-stream join is stateful, "
            "and Real-time Mode runs stateless queries only: use interval=<duration>"
        )
    return None


def _refused_source(name: str, source: SourceSpec) -> str | None:
    if source.format != "kafka":
        return (
            f"source {name!r} is {source.format}: Real-time Mode reads Kafka only "
            "(through Spark's connector)"
        )
    if source.value_format == "protobuf":
        return (
            f"source {name!r} has Protobuf values, which streamsmith decodes in Python "
            "(mapInArrow), an operator Spark's Real-time Mode does not run: use "
            "interval=<duration>"
        )
    if source.connector == "python":
        return (
            f"source {name!r} reads with streamsmith's Python Kafka connector (a Python "
            "data source, which Real-time Mode cannot run): set connector: jvm or auto"
        )
    for key in source.options:
        lowered = key.lower()
        if lowered in _PYTHON_CONNECTOR_OPTIONS:
            return (
                f"source {name!r} option {key} needs streamsmith's Python Kafka connector, "
                "which Real-time Mode cannot run: leave it out (the flow parses the JSON)"
            )
        if lowered in _BATCH_ONLY_OPTIONS:
            return (
                f"source {name!r} option {key} sizes micro-batches; Spark's Kafka source "
                "refuses it in Real-time Mode: leave it out"
            )
    return None


def _refused_sink(sink: Sink, output_mode: str) -> str | None:
    if sink.format != "kafka":
        return (
            f"its {sink.format} sink ({sink.kind} {sink.target}) writes micro-batches; "
            "Real-time Mode writes to Kafka topics only: write to a kafka sink, or use "
            "interval=<duration>"
        )
    if getattr(sink.options, "connector", "auto") == "python":
        return (
            "its kafka sink writes with streamsmith's Python connector, which Real-time "
            "Mode cannot run: set connector: jvm or auto"
        )
    if getattr(sink.options, "value_format", "raw") == "protobuf":
        return (
            "its kafka sink encodes Protobuf values in Python (mapInArrow), an operator "
            "Spark's Real-time Mode does not run: use interval=<duration>"
        )
    if getattr(sink.options, "value_format", "raw") == "avro":
        return (
            "its kafka sink encodes Avro values, which streamsmith has not yet run in "
            "Real-time Mode: use interval=<duration>"
        )
    if output_mode == "complete":
        return "complete mode needs an aggregation, which Real-time Mode cannot run on 4.2"
    return None


def _refused_interval(spec: PipelineSpec, trigger: Trigger) -> str | None:
    configured = spec.spark.conf.get(MIN_BATCH_DURATION)
    minimum_ms = SPARK_MIN_BATCH_MS if configured is None else _milliseconds(configured)
    if trigger.interval_seconds * 1000 < minimum_ms:
        return (
            f"Spark checkpoints a real-time query at most every {minimum_ms} ms "
            f"({MIN_BATCH_DURATION}): write real-time={minimum_ms}ms or longer"
        )
    return None


def _milliseconds(value: object) -> float:
    """Spark's time conf (a number of milliseconds, or a duration such as ``1s``)."""
    text = str(value).strip()
    return float(text) if text.replace(".", "", 1).isdigit() else parse_duration(text) * 1000


def check_task_slots(
    spark: SparkSession, source: SourceSpec, query: str, *, dead_letters: bool
) -> None:
    """Refuse to start a real-time query that needs more task slots than Spark has.

    Spark runs one long-running task per topic-partition, all at once; with too few
    slots the tasks left over wait for a slot that never frees, and the query sits
    silently without progress. A flow's dead-letter query needs one slot more for its
    micro-batches' tasks, which the real-time tasks would otherwise hold forever.
    """
    from streamsmith.io.kafka.client import BrokerMetadata
    from streamsmith.io.kafka.source import parse_options  # PyArrow: on use

    kept = {
        key: str(value)
        for key, value in source.options.items()
        if key.lower().startswith("kafka.") or key.lower() in _SUBSCRIPTIONS
    }
    parsed = parse_options(kept, streaming=True)
    metadata = BrokerMetadata(parsed.kafka_conf)
    try:
        partitions = len(metadata.partitions(parsed.subscription))
    finally:
        metadata.close()
    slots = spark.sparkContext.defaultParallelism
    needed = partitions + int(dead_letters)
    if needed > slots:
        letters = ", and one for its dead-letter query's micro-batches," if dead_letters else ""
        raise UserError(
            f"query {query} runs in Real-time Mode: one long-running task for each of the "
            f"{partitions} topic-partition(s) it reads{letters} needs {needed} task "
            f"slots, and Spark has {slots}: give Spark more cores (spark.master local[N], "
            "executors), or read fewer partitions"
        )
