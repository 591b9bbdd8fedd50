"""Each query over a Kafka source reads only the columns it uses.

Spark copies every column of every row a Python data source yields into an
``UnsafeRow`` before the first operator, and gives such sources no column pruning:
with ``valueFormat=json`` YSB paid 0.83 µs a row for the source's whole shape against
0.30 µs for the three fields it reads (``benchmarks/source_rows.py``). The runtime
knows each query, so it prunes for Spark: it optimizes the query's plan over a whole
read, collects what the plan uses of the source's relation (a Kafka column, a field of
the decoded ``json`` struct, or the struct whole), and reads the source again with the
``columns`` option naming those (``streamsmith.io.kafka.columns``). The pruned read
keeps the frame's shape (``streamsmith.io.sources.kafka``), so the flow's code and the
query's output are unchanged; the source still decodes every field of every value, so
a value with a wrong-typed field no query reads still lands in quarantine.

A flow's main query reads for itself: YSB's takes three fields and ``json_error``, no
raw ``value``. Its quarantine and late-events queries keep the whole read (see
:func:`pruned_query_frame`); the quarantine query needs ``value`` whole anyway, since a
record may be rejected after it decoded (a missing required field, an expectation),
and its raw payload goes to quarantine.

Nothing is pruned, and the query reads as before, when the plan cannot say reliably:
a flow joining further streams, the JVM connector, a ``columns`` option already given, a
Spark Connect session, a plan Spark cannot serialize, a value schema this module's DDL
parser reads differently from Spark, or a plan whose node references name a source
column the serialized expressions do not show.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from streamsmith.io.kafka.columns import (
    FIELD_PREFIX,
    JSON,
    JSON_ERROR,
    KAFKA_COLUMNS,
)
from streamsmith.io.kafka.options import SOURCE_NAME
from streamsmith.runtime.frames import FlowFrames, flow_frames, query_frame
from streamsmith.runtime.outputs import Output
from streamsmith.runtime.plan import FlowPlan, is_side_query
from streamsmith.schemas.ddl import DDLError, parse_schema

log = logging.getLogger(__name__)

COLUMNS = "columns"
VALUE_SCHEMA = "valueSchema"
_LEAF = "org.apache.spark.sql.catalyst.streaming.StreamingRelationV2"
_ATTRIBUTE = "org.apache.spark.sql.catalyst.expressions.AttributeReference"
_FIELD = "org.apache.spark.sql.catalyst.expressions.GetStructField"


def pruned_query_frame(
    spark: SparkSession, flow: FlowPlan, output: Output, root: Path, frames: FlowFrames
) -> DataFrame:
    """The query of ``output`` over ``frames`` (a whole read of the flow's source), or,
    for a main query, the same query over a read of only the Kafka columns it uses.

    A side query (quarantine, late events) keeps the whole read: it skips the batches
    that hold nothing for it (``streamsmith.runtime.flow_batches``), so it reads few
    rows, and a read of its own would cost another build of the flow's frames at every
    start (about 0.5 s on two busy cores) for no gain.
    """
    frame = query_frame(spark, flow, output, root, frames)
    ddl = None if is_side_query(flow, output) else _value_schema(flow)
    columns = None if ddl is None else _columns_used(spark, frame, ddl)
    if ddl is None or columns is None:
        return frame
    log.info("query %s reads Kafka columns %s", output.query_name, columns)
    options = {**flow.source.options, VALUE_SCHEMA: ddl, COLUMNS: columns}
    pruned = replace(flow, source=flow.source.model_copy(update={"options": options}))
    counts = output.role != "sink"  # as query_frame builds them
    narrow = flow_frames(spark, pruned, root, streaming=True, tables=frames.tables, counts=counts)
    return query_frame(spark, pruned, output, root, narrow)


def _value_schema(flow: FlowPlan) -> str | None:
    """The DDL the flow's Kafka source decodes its JSON values with, when its reads can
    be pruned; None when they cannot."""
    source = flow.source
    keys = {key.lower(): key for key in source.options}
    decoded = str(source.options.get(keys.get("valueformat", ""), "raw")).lower() == "json"
    if source.format != "kafka" or not decoded or COLUMNS in keys or flow.streams:
        return None
    if source.connector == "jvm":
        return None
    if "valueschema" in keys:
        return str(source.options[keys["valueschema"]])
    schema = flow.definition.record_schema
    return None if schema is None else schema.toDDL()


def _columns_used(spark: SparkSession, frame: DataFrame, ddl: str) -> str | None:
    """The ``columns`` option naming what ``frame``'s plan uses of its Kafka read; None
    when it uses everything, or when the plan cannot tell."""
    if not hasattr(frame, "_jdf"):  # Spark Connect: no plan to read here
        return None
    try:
        analyzed = frame._jdf.queryExecution().analyzed()
        optimized = spark._jsparkSession.sessionState().optimizer().execute(analyzed)
        nodes = json.loads(optimized.toJSON())
        outputs = _ids(optimized.output())
        references = _references(optimized)
    # Spark's own errors come converted (PySparkException), others as py4j's.
    except (Py4JError, PySparkException, ValueError) as exc:  # unreadable: prune nothing
        log.info("reading every Kafka column: the query's plan cannot be read (%s)", exc)
        return None
    try:
        value_type = parse_schema(ddl).jsonValue()
    except DDLError:
        return None
    return columns_used(nodes, outputs, references, value_type)


def _ids(attributes: Any) -> set[int]:
    """The expression ids of a JVM ``Seq[Attribute]``."""
    return {int(attributes.apply(i).exprId().id()) for i in range(attributes.size())}


def _references(plan: Any) -> set[int]:
    """The ids of every attribute any node of the JVM ``plan`` references (subqueries'
    plans included): the check on what the serialized plan shows."""
    found: set[int] = set()
    pending = [plan]
    while pending:
        node = pending.pop()
        found |= _ids(node.references().toSeq())
        for children in (node.children(), node.subqueries()):
            pending.extend(children.apply(i) for i in range(children.size()))
    return found


def columns_used(
    nodes: list[dict[str, Any]],
    outputs: Iterable[int],
    references: Iterable[int],
    value_type: Mapping[str, Any],
) -> str | None:
    """The ``columns`` option for a plan (``nodes``, Spark's ``LogicalPlan.toJSON``)
    whose root outputs the attributes ``outputs`` and whose nodes reference
    ``references``, over one streamsmith Kafka read decoding ``value_type`` (the value
    schema as Spark's JSON).

    A source attribute the plan outputs or names anywhere but under a struct-field access
    of ``json`` is used whole; under one, only that field. None: the plan reads every
    column, holds no such read or more than one, decodes another value type, or
    references an attribute of the read the serialized expressions do not show.
    """
    leaves = [n for n in nodes if n["class"] == _LEAF and n.get("sourceName") == SOURCE_NAME]
    if len(leaves) != 1:
        return None
    attributes = {int(tree[0]["exprId"]["id"]): tree[0] for tree in leaves[0]["output"] if tree}
    by_name = {attribute["name"]: attribute for attribute in attributes.values()}
    decoded = by_name.get(JSON)
    if decoded is None or decoded["dataType"] != dict(value_type):
        return None
    uses = _Uses(set(attributes), int(decoded["exprId"]["id"]), leaves[0])
    uses.tree(nodes)
    uses.whole |= set(outputs) & set(attributes)
    if not (set(references) & set(attributes)) <= uses.whole | uses.fields.keys():
        return None
    names = [attributes[key]["name"] for key in uses.whole]
    field_names = [field["name"] for field in decoded["dataType"]["fields"]]
    if JSON in names:
        fields = field_names
    else:
        fields = [field_names[i] for i in sorted({i for s in uses.fields.values() for i in s})]
    kafka = [name for name in KAFKA_COLUMNS if name in names]
    if kafka == [name for name in KAFKA_COLUMNS if name in by_name] and fields == field_names:
        return None  # every column: nothing to prune
    return ",".join([*kafka, *(f"{FIELD_PREFIX}{f}" for f in fields), JSON_ERROR])


class _Uses:
    """What expression trees use of a read's attributes: whole, or by ``json`` field."""

    def __init__(self, attributes: set[int], decoded: int, read: dict[str, Any]) -> None:
        self.attributes = attributes
        self.decoded = decoded
        self.read = read  # the read's own node: its output lists, not uses, its attributes
        self.whole: set[int] = set()
        self.fields: dict[int, set[int]] = {}

    def value(self, value: Any) -> None:
        """Find the trees in a serialized field's ``value``."""
        if isinstance(value, list):
            if value and all(isinstance(v, dict) and "num-children" in v for v in value):
                self.tree(value)
            else:
                for item in value:
                    self.value(item)
        elif isinstance(value, dict):
            for key, item in value.items():
                if key not in ("class", "num-children"):
                    self.value(item)

    def tree(self, nodes: list[dict[str, Any]]) -> None:
        """A tree serialized in pre-order, each node with its ``num-children``."""
        parents: list[int | None] = []
        open_nodes: list[list[int]] = []  # [index, children still to come]
        for index, node in enumerate(nodes):
            parents.append(open_nodes[-1][0] if open_nodes else None)
            if open_nodes:
                open_nodes[-1][1] -= 1
                if open_nodes[-1][1] == 0:
                    open_nodes.pop()
            children = int(node.get("num-children", 0))
            if children:
                open_nodes.append([index, children])
            if node is self.read:
                continue
            parent = parents[index]
            self._node(node, None if parent is None else nodes[parent])
            self.value(node)

    def _node(self, node: dict[str, Any], parent: dict[str, Any] | None) -> None:
        if node.get("class") != _ATTRIBUTE:
            return
        key = int(node["exprId"]["id"])
        if key not in self.attributes:
            return
        if key == self.decoded and parent is not None and parent.get("class") == _FIELD:
            self.fields.setdefault(key, set()).add(int(parent["ordinal"]))
        else:
            self.whole.add(key)
