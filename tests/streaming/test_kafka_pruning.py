"""A flow over Kafka JSON values reads only the columns it uses (``runtime.pruning``):
the same table and quarantine as a read of every column, with the source handing
Spark only what the main query reads."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from streamsmith.config import Trigger, load_spec
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.lake import read_table, table_path
from streamsmith.runtime.app import App, FlowDefinition
from streamsmith.runtime.plan import Plan, build_plan
from streamsmith.runtime.runner import run_pipeline
from streamsmith.runtime.start import start_queries
from streamsmith.schemas.ddl import parse_schema
from streamsmith.transforms.events import RecordParser

Produce = Callable[..., None]

FIELDS = "a STRING, b INT, c DOUBLE, d STRING, e STRING, f BOOLEAN, g STRING"
SCHEMA = parse_schema(FIELDS)
EVERY_COLUMN = (
    "key,value,topic,partition,offset,timestamp,timestampType,"
    + ",".join(f"json.{name}" for name in SCHEMA.fieldNames())
    + ",json_error"
)


def three_fields(events: DataFrame) -> DataFrame:
    """Reads a, b and c of the record's seven fields."""
    return events.select("a", "b", (F.col("c") * 2).alias("twice_c"))


def _plan(broker: EmbeddedBroker, topic: str, root: Path, **options: Any) -> Plan:
    definition = FlowDefinition(
        "picked",
        three_fields,
        "three of seven fields",
        record_schema=SCHEMA,
        prepare=RecordParser(SCHEMA, required=("a",)),
    )
    source = {
        "kafka.bootstrap.servers": broker.bootstrap,
        "subscribe": topic,
        "startingOffsets": "earliest",
        "valueFormat": "json",
        **options,
    }
    app = App(
        name="picked",
        description="three fields of seven",
        flows=(definition,),
        default_spec={
            "app": "picked",
            "sources": {"records": {"format": "kafka", "options": source}},
            "flows": {"picked": {"source": "records", "sink": {"table": "picked"}}},
        },
    )
    spec = load_spec(app.default_spec, storage_root=str(root))
    return build_plan(app, spec, Trigger("available-now"))


def _record(i: int) -> dict[str, Any]:
    return {"a": f"a{i}", "b": i, "c": i / 4, "d": "d", "e": "e" * i, "f": i % 2 == 0, "g": "g"}


MALFORMED = b'{"a": "x", "b": '
MISTYPED_UNREAD = json.dumps({**_record(99), "g": 5}).encode()  # g: no query reads it
MISSING_A = json.dumps({"b": 7, "c": 1.5}).encode()  # decodes, then fails a check


def test_a_flow_reading_three_of_seven_fields_gives_the_table_and_quarantine_of_a_whole_read(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, produce: Produce, tmp_path: Path
) -> None:
    good = [json.dumps(_record(i)).encode() for i in range(45)]
    produce(topic, [*good[:20], MALFORMED, *good[20:], MISTYPED_UNREAD, MISSING_A])
    pruned = _plan(broker, topic, tmp_path / "pruned")
    whole = _plan(broker, topic, tmp_path / "whole", columns=EVERY_COLUMN)  # given: kept

    run_pipeline(spark, pruned)
    run_pipeline(spark, whole)

    def table(plan: Plan, name: str) -> DataFrame:
        return read_table(spark, table_path(plan.root, name))

    expected = spark.createDataFrame(
        [(f"a{i}", i, i / 2) for i in range(45)], "a string, b int, twice_c double"
    )
    assertDataFrameEqual(table(pruned, "picked"), expected)
    assertDataFrameEqual(table(pruned, "picked"), table(whole, "picked"))
    columns = ["reason", "source_file", "position", "raw"]
    rejects = table(pruned, "picked_quarantine").select(columns)
    assertDataFrameEqual(rejects, table(whole, "picked_quarantine").select(columns))
    found = {(r.raw, r.reason.split(":")[0], r.source_file.startswith(f"kafka://{topic}/"))
             for r in rejects.collect()}  # fmt: skip
    assert found == {
        (MALFORMED.decode(), "invalid JSON value", True),
        (MISTYPED_UNREAD.decode(), "invalid JSON value", True),
        (MISSING_A.decode(), "missing or invalid field a", True),
    }


def _source_columns(query: Any) -> dict[str, str]:
    """The columns (and their types) the query's Kafka source yields: its relation's
    output in the plan Spark ran (Spark checks every Arrow batch against it)."""
    plan = query._jsq.streamingQuery().lastExecution().analyzed()
    leaves = plan.collectLeaves()
    for index in range(leaves.size()):
        leaf = leaves.apply(index)
        if "Streaming" in leaf.getClass().getSimpleName():
            output = leaf.output()
            attributes = [output.apply(i) for i in range(output.size())]
            return {a.name(): a.dataType().simpleString() for a in attributes}
    raise AssertionError(f"no streaming source in {plan}")


def test_the_main_query_s_source_yields_only_what_it_reads(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, produce: Produce, tmp_path: Path
) -> None:
    produce(topic, [json.dumps(_record(i)).encode() for i in range(6)])
    plan = _plan(broker, topic, tmp_path)

    started = start_queries(spark, plan)
    try:
        for _, query in started:
            query.processAllAvailable()
        yielded = {output.role: _source_columns(query) for output, query in started}
    finally:
        for _, query in started:
            query.stop()

    # The record's Kafka timestamp too: the flow's latency counts from it.
    assert yielded["main"] == {
        "timestamp": "timestamp", "json": "struct<a:string,b:int,c:double>", "json_error": "string"
    }  # fmt: skip
    # The side query keeps the whole read: the raw value of any reject is there.
    assert list(yielded["quarantine"]) == [
        *("key", "value", "topic", "partition", "offset", "timestamp", "timestampType"),
        *("json", "json_error"),
    ]
