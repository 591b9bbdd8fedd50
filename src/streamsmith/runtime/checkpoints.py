"""Whether new code can resume a query's checkpoint (what it holds: ``checkpoint_files``).

Every time streamsmith starts a query it writes a *fingerprint* next to Spark's files
(``<checkpoint>/streamsmith-flow.json``): the source and its input, the sink, the output
schema and the stateful operators of the query's plan (from Spark's analyzed plan,
without expression ids). ``check-upgrade`` computes the same fingerprint from the
current code and compares the two by Spark's rules for changes between restarts
("Recovery Semantics after Changes in a Streaming Query"):

- the type of source and its input (files, subscribed topics) may not change;
  rate limits may;
- the stateful operators (aggregations, deduplication, stream-stream joins, arbitrary
  state) may not change their keys, their aggregates or their kind, since the state
  stored in the checkpoint would no longer fit; the watermark delay may change;
- filters, projections and other stateless steps may change as long as the sink accepts
  the output schema: a lake table or a PostgreSQL table does not accept a new schema;
- a file sink may become a Kafka sink, not the reverse; Kafka topics and ``foreachBatch``
  sinks (PostgreSQL, late events, webhooks, users' functions) may be switched; a lake
  table may not move. Each sink states its rules (``UpgradeRules``); the fingerprint
  records them, so a checkpoint is judged by the rules of the sink that wrote it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DataType

from streamsmith.io.sinks.base import UpgradeRules
from streamsmith.io.sources.base import Source
from streamsmith.io.state_files import read_json_state, write_durably
from streamsmith.runtime.frames import flow_frames, output_frame
from streamsmith.runtime.outputs import Output
from streamsmith.runtime.plan import FlowPlan, Plan
from streamsmith.runtime.side_sinks import side_notes
from streamsmith.schemas.ddl import DDLError, parse_schema
from streamsmith.schemas.inference import only_grows
from streamsmith.spark import jvm

FINGERPRINT_FILE = "streamsmith-flow.json"
# 2: the sink's upgrade rules are recorded beside its kind.
FINGERPRINT_VERSION = 2

# Logical operators that keep state in a streaming query (when fed by a stream).
_STATEFUL = {
    "Aggregate",
    "Deduplicate",
    "DeduplicateWithinWatermark",
    "FlatMapGroupsWithState",
    "FlatMapGroupsInPandasWithState",
    "TransformWithState",
    "TransformWithStateInPySpark",
}
# The rules of the sinks that wrote version-1 fingerprints, which name only their kind.
_RULES_BEFORE_V2 = {
    "table": UpgradeRules("file", keeps_schema=True, fixed_location=True),
    "quarantine": UpgradeRules("file", keeps_schema=True, fixed_location=True),
    "late": UpgradeRules("foreach", fixed_location=True),
    "topic": UpgradeRules("kafka"),
    "postgres": UpgradeRules("foreach", keeps_schema=True),
    "memory": UpgradeRules("rebuilt"),
    "webhook": UpgradeRules("foreach"),
}


# ---------------------------------------------------------------------------------------
# Fingerprints


def fingerprint(frame: DataFrame, output: Output, flow: FlowPlan) -> dict[str, Any]:
    """What about a query decides whether its checkpoint can be resumed."""
    print_: dict[str, Any] = {
        "version": FINGERPRINT_VERSION,
        "query": output.query_name,
        "source": _source_print(flow.input),
        "sink": {
            "kind": output.kind,
            "target": _target(output),
            "mode": output.output_mode,
            "rules": output.sink.upgrade.as_dict(),
        },
        "output_schema": [[f.name, f.dataType.simpleString()] for f in frame.schema.fields],
        "stateful": stateful_operators(frame),
    }
    if flow.streams:  # stream-stream joins: Spark numbers the sources in plan order
        print_["streams"] = [_source_print(stream.input) for stream in flow.streams]
    return print_


def _source_print(source: Source) -> dict[str, str]:
    return {"format": source.spec.format, "input": source.identity()}


def _target(output: Output) -> str:
    return str(output.path) if output.path is not None else output.table


def record_fingerprint(checkpoint: Path, print_: dict[str, Any]) -> None:
    """Keep the fingerprint of the code that is now running this checkpoint."""
    checkpoint.mkdir(parents=True, exist_ok=True)
    write_durably(checkpoint / FINGERPRINT_FILE, json.dumps(print_, indent=1))


def stored_fingerprint(checkpoint: Path) -> dict[str, Any] | None:
    path = checkpoint / FINGERPRINT_FILE
    if not path.is_file():
        return None
    remedy = "remove it; the next run records the running code's fingerprint again"
    stored: dict[str, Any] = read_json_state(path, remedy)
    return stored


def stateful_operators(frame: DataFrame) -> list[dict[str, Any]]:
    """The stateful operators of a streaming frame's analyzed plan, outermost first."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        children = [node.children().apply(i) for i in range(node.children().size())]
        name = str(node.nodeName())
        streaming_join = (
            name == "Join" and len(children) == 2 and all(c.isStreaming() for c in children)
        )
        if node.isStreaming() and (name in _STATEFUL or streaming_join):
            definition = _normalise(str(node.simpleString(100)))
            operator: dict[str, Any] = {"operator": name, "definition": definition}
            if name == "Aggregate":  # its output: grouping keys and aggregate results
                fields = node.schema().fields()
                operator["types"] = [str(f.dataType().simpleString()) for f in fields]
            found.append(operator)
        for child in children:
            walk(child)

    walk(jvm.analyzed_plan(frame))
    return found


def _normalise(text: str) -> str:
    """An operator's text without what may change between runs: expression ids,
    watermark delays, aliases and watermark ids."""
    text = text.lstrip("~")
    text = re.sub(r"#\d+L?", "", text)
    text = re.sub(r"-T\d+ms", "", text)
    text = re.sub(r" AS [^,\]\)]+", "", text)
    return text


# ---------------------------------------------------------------------------------------
# Verdicts


@dataclass
class Verdict:
    """Whether a query's checkpoint can be resumed by the current code, and why not."""

    query: str
    resumable: bool
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        if not self.resumable:
            return "needs --full-refresh: " + "; ".join(self.reasons)
        extra = f" ({'; '.join(self.notes)})" if self.notes else ""
        return "resumes safely" + extra


def compare(old: dict[str, Any], new: dict[str, Any]) -> Verdict:
    """Spark's rules for changes between restarts, applied to two fingerprints."""
    verdict = Verdict(str(new["query"]), True)
    reasons, notes = verdict.reasons, verdict.notes
    if old["source"]["format"] != new["source"]["format"]:
        reasons.append(
            f"the source changed from {old['source']['format']} to {new['source']['format']}: "
            "the stored offsets belong to the old one"
        )
    elif old["source"]["input"] != new["source"]["input"]:
        reasons.append(
            f"the source input changed ({old['source']['input']} -> {new['source']['input']}): "
            "Spark's results over the stored offsets would be unpredictable"
        )
    if old.get("streams", []) != new.get("streams", []):
        reasons.append(
            f"the joined streams changed ({old.get('streams', [])} -> "
            f"{new.get('streams', [])}): the stored offsets are per source"
        )
    reasons += _sink_changes(old["sink"], new["sink"], old["output_schema"], new["output_schema"])
    reasons += _state_changes(old["stateful"], new["stateful"])
    added = [column for column in new["output_schema"] if column not in old["output_schema"]]
    if not reasons and added and _only_added(old["output_schema"], new["output_schema"]):
        notes.append(f"adds column(s) {_columns(added)}: rows written before read them as null")
    elif not reasons and old["output_schema"] != new["output_schema"]:
        notes.append("the output schema changed; the sink accepts it")
    if not reasons and old["sink"]["target"] != new["sink"]["target"]:
        notes.append(f"output moves to {new['sink']['target']}: it gets new results only")
    verdict.resumable = not reasons
    return verdict


def _rules(sink: dict[str, Any]) -> UpgradeRules:
    if "rules" in sink:
        return UpgradeRules(**sink["rules"])
    return _RULES_BEFORE_V2[sink["kind"]]


def _sink_changes(
    old: dict[str, Any], new: dict[str, Any], old_schema: list[Any], new_schema: list[Any]
) -> list[str]:
    kinds = (old["kind"], new["kind"])
    was, now = _rules(old), _rules(new)
    if kinds[0] != kinds[1]:
        families = (was.family, now.family)
        allowed = (
            "rebuilt" in families  # nothing to resume on that side
            or families == ("file", "kafka")
            or set(families) <= {"foreach", "kafka"}
        )
        if not allowed:
            return [f"the sink changed from {kinds[0]} to {kinds[1]}, which Spark does not allow"]
        return []
    if now.fixed_location and old["target"] != new["target"]:
        return [f"the lake table moved ({old['target']} -> {new['target']}): a file sink's "
                "output directory may not change"]  # fmt: skip
    if now.keeps_schema and old_schema != new_schema:
        if now.adds_columns and _only_added(old_schema, new_schema):
            return []
        return [f"the output schema changed ({_columns(old_schema)} -> {_columns(new_schema)}) "
                f"and the {new['kind']} sink keeps the old one"]  # fmt: skip
    return []


def _only_added(old_schema: list[Any], new_schema: list[Any]) -> bool:
    """Whether the new output keeps every old column, by name and type, and adds some
    (new columns, or new members of the structs a column holds)."""
    new_types = {name: kind for name, kind in new_schema}
    return all(
        name in new_types
        and (new_types[name] == kind or _grows(_type(kind), _type(new_types[name])))
        for name, kind in old_schema
    )


def _grows(old: DataType | None, new: DataType | None) -> bool:
    return old is not None and new is not None and only_grows(old, new)


def _type(simple: str) -> DataType | None:
    """A column type as the plan records it (Spark's simple string), parsed; None for a
    type a record schema does not use (such a column is compared as text only)."""
    try:
        return parse_schema(f"c {simple}").fields[0].dataType
    except DDLError:
        return None


def _state_changes(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[str]:
    if [op["operator"] for op in old] != [op["operator"] for op in new]:
        before = ", ".join(op["operator"] for op in old) or "none"
        after = ", ".join(op["operator"] for op in new) or "none"
        return [f"the stateful operators changed ({before} -> {after})"]
    reasons = []
    for number, (was, now) in enumerate(zip(old, new, strict=True), start=1):
        name = f"stateful operator {number} ({now['operator']})"
        if was["definition"] != now["definition"]:
            reasons.append(
                f"{name} changed its keys or aggregates: `{was['definition']}` -> "
                f"`{now['definition']}`"
            )
        elif was.get("types") != now.get("types"):
            reasons.append(
                f"{name} changed its state schema: {was.get('types')} -> {now.get('types')}"
            )
    return reasons


def _columns(schema: list[Any]) -> str:
    return ", ".join(f"{name} {kind}" for name, kind in schema)


def check_upgrade(spark: SparkSession, plan: Plan) -> list[Verdict]:
    """A verdict for every query of ``plan`` against its existing checkpoint."""
    verdicts = []
    for flow in plan.flows:
        frames = flow_frames(spark, flow, plan.root, streaming=True)
        for output in flow.outputs:
            new = fingerprint(output_frame(frames, output), output, flow)
            verdict = _verdict(output, new)
            verdict.notes += side_notes(output.sink, output.checkpoint)
            if flow.schema_store is not None and any("state" in r for r in verdict.reasons):
                verdict.reasons.append(
                    f"source {flow.source_name} adds fields as they appear (schema_evolution: "
                    "add_new_columns) and they reach this state: select the columns the state "
                    "needs before the stateful step, or start over with --full-refresh"
                )
            verdicts.append(verdict)
    return verdicts


def _verdict(output: Output, new: dict[str, Any]) -> Verdict:
    if output.sink.upgrade.family == "rebuilt":
        note = f"{output.kind} outputs are rebuilt every run"
        return Verdict(output.query_name, True, notes=[note])
    if not (output.checkpoint / "offsets").is_dir():
        return Verdict(output.query_name, True, notes=["no checkpoint yet: starts fresh"])
    old = stored_fingerprint(output.checkpoint)
    if old is None:
        return Verdict(
            output.query_name,
            False,
            reasons=[
                "the checkpoint has no fingerprint (written before streamsmith recorded "
                "them): it cannot be checked"
            ],
        )
    return compare(old, new)
