"""A feed that changes shape under ``schema_evolution: rescue``: what the schema lacks, and
values of the wrong type, stay in the row's ``_rescued_data``; nothing is quarantined for
that alone, and every record is in the table or the quarantine."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F
from typer.testing import CliRunner

from feeds import deliver, feed_project
from streamsmith.cli import cli
from streamsmith.config import Trigger
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.lake import backfill_path, read_table, register_lake_views, table_path
from streamsmith.io.schema_store import schema_dir, versions
from streamsmith.monitor.eventlog import read_events
from streamsmith.monitor.status import query_statuses
from streamsmith.monitor.status_view import compact_lines
from streamsmith.pipelines import load_pipeline
from streamsmith.read.engine import answer
from streamsmith.runtime.checkpoints import check_upgrade
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import PipelineError, backfill, run_pipeline
from streamsmith.schemas.ddl import parse_schema
from streamsmith.testing import check_prefix_integrity
from streamsmith.transforms.events import NOT_UTF8, RESCUED, RecordParser
from streamsmith.transforms.quarantine import REJECT_REASON
from streamsmith.web.server import Dashboard

Produce = Callable[..., None]


def test_kafka_shaped_records_keep_what_the_schema_lacks(spark: SparkSession) -> None:
    records = [
        ('{"id": "a", "n": 1}', 10),
        ('{"id": "b", "n": "two", "new": {"x": [1]}}', 11),
        ('{"id": "c", "n": null, "flag": true}', 12),
        ('{"id": "e", "n": 2, "geo": {"lat": 1, "lon": 2}}', 15),
        ('{"id": "d"', 13),
        ('{"n": 5}', 14),
        ('{"id": "f", "n": 3, "taxi_out": 23, "gate": "23", "aircraft": {"tail": "N1"}}', 17),
    ]
    rows_in = [
        (value.encode(), "kafka://t/0", str(offset), value, None) for value, offset in records
    ]
    invalid = b'{"id": "u\xff", "n": 1}'  # not UTF-8: no lake table may hold it as text
    rows_in.append((invalid, "kafka://t/0", "16", invalid.decode("latin-1"), None))
    frame = spark.createDataFrame(
        rows_in,
        "value binary, _source_file string, _position string, _raw string, _read_error string",
    )
    parse = RecordParser(parse_schema("id string, n int, geo struct<lat: int>"), ("id",),
                         rescue=True)  # fmt: skip
    rows = {row.id or row._raw: row for row in parse(frame).collect()}
    assert rows["a"][RESCUED] is None and rows["a"][REJECT_REASON] is None
    # Each rescued value keeps its JSON type: a later from_json or get_json_object
    # recovers it exactly (a number is no string, an object no escaped text).
    assert json.loads(rows["b"][RESCUED]) == {
        "n": "two",
        "new": {"x": [1]},
        "_file_path": "kafka://t/0",
        "_position": "11",
    }
    assert rows["b"].n is None and rows["b"][REJECT_REASON] is None  # rescued, not rejected
    assert json.loads(rows["c"][RESCUED])["flag"] is True  # a JSON null is no mismatch
    assert "n" not in json.loads(rows["c"][RESCUED])
    assert json.loads(rows["e"][RESCUED])["geo.lon"] == 2  # nested, by its path
    assert json.loads(rows["f"][RESCUED]) == {
        "taxi_out": 23,
        "gate": "23",
        "aircraft": {"tail": "N1"},
        "_file_path": "kafka://t/0",
        "_position": "17",
    }
    (tail,) = (
        parse(frame).where("id = 'f'").select(F.get_json_object(RESCUED, "$.aircraft.tail")).first()
    )
    assert tail == "N1"
    rescued = (
        parse(frame)
        .where("id = 'b'")
        .select(
            F.get_json_object(RESCUED, "$.new.x[0]").alias("x"),
            F.from_json(RESCUED, "new struct<x: array<int>>").alias("typed"),
        )
    )
    assert rescued.first() == (
        "1",
        Row(new=Row(x=[1])),
    )
    assert rows['{"id": "d"'][REJECT_REASON] == "malformed JSON value"
    assert rows['{"n": 5}'][REJECT_REASON] == "missing or invalid field id"
    (bad,) = [row for row in parse(frame).collect() if row._position == "16"]
    assert bad[REJECT_REASON] == NOT_UTF8


def test_members_new_to_the_structs_of_an_array_are_rescued_item_by_item(
    spark: SparkSession,
) -> None:
    value = '{"id": "a", "items": [{"sku": "x", "qty": 1}, {"sku": "y"}, {"sku": "z", "qty": 3}]}'
    frame = spark.createDataFrame(
        [(value.encode(), "kafka://t/0", "7", value, None)],
        "value binary, _source_file string, _position string, _raw string, _read_error string",
    )
    parse = RecordParser(parse_schema("id string, items array<struct<sku: string>>"), ("id",),
                         rescue=True)  # fmt: skip
    (row,) = parse(frame).collect()
    assert [item.sku for item in row["items"]] == ["x", "y", "z"]
    rescued = json.loads(row[RESCUED])
    assert rescued["items[].qty"] == [1, None, 3]  # each item's, in order, as JSON


def test_an_inferred_jsonl_feed_gains_a_field_and_changes_a_type(
    spark: SparkSession, tmp_path: Path
) -> None:
    folder = feed_project(tmp_path, "feed", schema_evolution="rescue")
    deliveries = [
        [{"id": "a", "n": 1, "ts": "2026-11-25T10:00:00Z"}, {"id": "b", "n": 2}],
        [{"id": "c", "n": 3, "city": "Oslo"}, {"id": "d", "n": "four"}, {"n": 5}],
    ]
    for number, records in enumerate(deliveries):
        lines = [json.dumps(record) for record in records] + (["{broken"] if number else [])
        (folder / f"part-{number}.jsonl").write_text("\n".join(lines) + "\n")
        app, pipeline = load_pipeline(tmp_path / "streamsmith.yml")
        run_pipeline(spark, build_plan(app, pipeline, Trigger("available-now")))
    root = tmp_path / "data"
    # Inferred once, from the first delivery.
    (version,) = versions(schema_dir(root, "feed", "events"))
    assert version.ddl == "id string, n bigint, ts timestamp"
    table = {row.id: row for row in read_table(spark, table_path(root, "events")).collect()}
    assert sorted(table) == ["a", "b", "c", "d"]
    assert table["a"][RESCUED] is None and table["a"].n == 1
    city = json.loads(table["c"][RESCUED])
    assert city["city"] == "Oslo" and city["_file_path"].endswith("part-1.jsonl")
    assert json.loads(table["d"][RESCUED])["n"] == "four" and table["d"].n is None
    rejected = read_table(spark, table_path(root, "events_quarantine")).collect()
    assert sorted(row.reason for row in rejected) == [
        "malformed JSON value",
        "missing or invalid field id",
    ]
    # Every line is somewhere: 6 records and one broken line = 4 rows + 2 quarantined.
    assert len(table) + len(rejected) == 6


def test_a_new_field_becomes_a_schema_version_and_a_column_with_nothing_lost(
    spark: SparkSession, tmp_path: Path
) -> None:
    """add_new_columns (the default with ``schema: infer``): the batch that meets a new
    field stops before it commits, a version with the field is stored, and the batch
    runs again under it; earlier rows read the column as null."""
    folder = feed_project(tmp_path, "grow")
    deliveries = [
        [{"id": "a", "n": 1}, {"id": "b", "n": 2}],
        [{"id": "c", "n": 3, "city": "Oslo"}, {"id": "d", "n": "four", "geo": {"lat": 1.5}}],
        [{"id": "e", "n": 5, "city": "Bergen", "geo": {"lat": 2.5, "alt": 10}}],
    ]
    deliver(spark, tmp_path, deliveries)
    root = tmp_path / "data"
    stored = versions(schema_dir(root, "grow", "events"))
    assert [v.ddl for v in stored] == [
        "id string, n bigint",
        "id string, n bigint, city string",
        "id string, n bigint, city string, geo struct<lat:double>",
        "id string, n bigint, city string, geo struct<lat:double,alt:bigint>",
    ]
    # The source names the file and the line (issue 50: the read numbers every line).
    assert stored[1].reason == f"new field(s) city in file:{folder}/part-1.jsonl at 1"
    table = {row.id: row for row in read_table(spark, table_path(root, "events")).collect()}
    assert sorted(table) == ["a", "b", "c", "d", "e"]  # each record once
    assert (table["a"].city, table["a"].geo) == (None, None)  # older rows: null
    assert table["c"].city == "Oslo" and table["e"].city == "Bergen"
    assert table["d"].geo.lat == 1.5 and json.loads(table["d"][RESCUED])["n"] == "four"
    assert (table["e"].geo.alt, table["d"].geo.alt) == (10, None)  # a struct that grew
    changes = [e["message"] for e in read_events(root, "grow") if e["event"] == "schema_change"]
    assert changes == [
        f"schema version 1: new field(s) city in file:{folder}/part-1.jsonl at 1",
        f"schema version 2: new field(s) geo in file:{folder}/part-1.jsonl at 2",
        f"schema version 3: new field(s) geo.alt in file:{folder}/part-2.jsonl at 1",
    ]
    restarts = [e for e in read_events(root, "grow") if e["event"] in ("failure", "gave_up")]
    assert restarts == []  # a schema change is not a failure
    incidents = json.dumps(Dashboard(root).data(), default=str)  # shown, as alerts are
    (status,) = [s for s in query_statuses(read_events(root)) if s.query == "grow.events"]
    assert status.schema_changes == 3 and status.restarts == 3
    assert any("schema changes 3" in line for line in compact_lines([status]))
    # The fast path reads the grown table as Spark does: older files lack the new columns.
    sql = "SELECT id, n, city, geo.lat AS lat FROM events ORDER BY id"
    fast, _ = answer(root, sql, max_rows=10)
    register_lake_views(spark, root)
    assert [tuple(row) for row in fast] == [tuple(row) for row in spark.sql(sql).collect()]
    assert "schema version 2: new field(s) geo" in incidents
    # The new columns are Delta schema changes that `table history` names, by version
    # (city and geo came in one batch, which commits once).
    shown = CliRunner().invoke(cli, ["table", "history", "events", "--root", str(root),
                                     "--format", "json"])  # fmt: skip
    assert shown.exit_code == 0, shown.output
    evolved = [json.loads(line)["schema"] for line in shown.output.splitlines()][::-1]
    assert [change for change in evolved if change] == [
        "added city string, geo struct<lat:double>",
        "changed geo: struct<lat:double> -> struct<lat:double,alt:bigint>",
    ]

    # A backfill over the same files (one more field in a new one) adds its version the
    # same way, and equals the stream's table under the newest schema.
    (folder / "part-3.jsonl").write_text(json.dumps({"id": "f", "n": 6, "k": [1]}) + "\n")
    app, pipeline = load_pipeline(tmp_path / "streamsmith.yml")
    report = backfill(spark, build_plan(app, pipeline))
    assert report.rows == {"events": 6, "events_quarantine": 0}
    assert versions(schema_dir(root, "grow", "events"))[-1].ddl.endswith("k array<bigint>")
    (verdict, _) = check_upgrade(spark, build_plan(app, pipeline))  # the table and quarantine
    assert verdict.resumable
    assert verdict.notes == [
        "adds column(s) k array<bigint>: rows written before read them as null"
    ]
    run_pipeline(spark, build_plan(app, pipeline, Trigger("available-now")))
    streamed = read_table(spark, table_path(root, "events"))
    batch = read_table(spark, backfill_path(root, "events"))

    # Same rows and values; the column order may differ: Delta appends a column a
    # stream's schema gained after the others, a backfill writes the final schema's order.
    def by_name(rows: list[Any]) -> list[str]:
        return sorted(json.dumps(row.asDict(recursive=True), sort_keys=True, default=str)
                      for row in rows)  # fmt: skip

    assert by_name(streamed.collect()) == by_name(batch.collect())


def test_structs_in_an_array_gain_a_member_as_a_new_schema_version(
    spark: SparkSession, tmp_path: Path
) -> None:
    folder = feed_project(tmp_path, "basket")
    deliveries = [
        [{"id": "a", "items": [{"sku": "x"}]}],
        [{"id": "b", "items": [{"sku": "y", "qty": 2}, {"sku": "z"}]}, {"id": "c", "items": []}],
    ]
    deliver(spark, tmp_path, deliveries)
    app, pipeline = load_pipeline(tmp_path / "streamsmith.yml")
    root = tmp_path / "data"
    stored = versions(schema_dir(root, "basket", "events"))
    assert [v.ddl for v in stored] == [
        "id string, items array<struct<sku:string>>",
        "id string, items array<struct<sku:string,qty:bigint>>",
    ]
    assert stored[1].reason == f"new field(s) items[].qty in file:{folder}/part-1.jsonl at 1"
    table = {row.id: row for row in read_table(spark, table_path(root, "events")).collect()}
    assert [(i.sku, i.qty) for i in table["a"]["items"]] == [("x", None)]  # older: null
    assert [(i.sku, i.qty) for i in table["b"]["items"]] == [("y", 2), ("z", None)]
    assert table["c"]["items"] == []
    sql = "SELECT id, size(items) AS n FROM events ORDER BY id"  # DuckDB reads both shapes
    fast, _ = answer(root, sql, max_rows=10)
    register_lake_views(spark, root)
    assert [tuple(row) for row in fast] == [tuple(row) for row in spark.sql(sql).collect()]
    (verdict, _) = check_upgrade(spark, build_plan(app, pipeline))
    assert verdict.resumable  # a member added inside an array: the table takes it


def test_fail_on_new_columns_stops_the_flow_naming_the_field(
    spark: SparkSession, tmp_path: Path
) -> None:
    folder = feed_project(
        tmp_path, "strict", schema="id string, n bigint", schema_evolution="fail_on_new_columns"
    )
    lines = [{"id": "a", "n": 1}, {"id": "b", "n": "two"}, {"id": "c", "n": 3, "city": "Oslo"}]
    (folder / "part-0.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    app, pipeline = load_pipeline(tmp_path / "streamsmith.yml")
    expected = f"new field(s) city in file:{folder}/part-0.jsonl at 3, which the schema lacks"
    with pytest.raises(PipelineError, match=re.escape(expected)):
        run_pipeline(spark, build_plan(app, pipeline, Trigger("available-now")))
    root = tmp_path / "data"
    events = read_events(root, "strict")
    gave_up = [e for e in events if e["event"] == "gave_up"]
    assert len(gave_up) == 1 and expected in gave_up[0]["message"]  # at once, no retries
    assert gave_up[0]["message"].startswith("not retried (the same batch would fail again): ")
    assert gave_up[0]["attempt"] == 1  # one attempt, not max_retries + 1 of them
    assert [e["attempt"] for e in events if e["event"] == "failure"] == [1]
    assert read_table(spark, table_path(root, "events")).isEmpty()  # the batch never committed
    with pytest.raises(PipelineError, match="flow events: new field.* fail_on_new_columns"):
        backfill(spark, build_plan(app, pipeline))


def test_a_kafka_source_infers_its_schema_and_gains_a_field(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, produce: Produce, tmp_path: Path
) -> None:
    """``schema: infer`` on Kafka samples the topic's first values; a value with a new
    field adds a version (named by its partition and offset) and a column."""
    spec = {
        "name": "stream",
        "storage_root": "data",
        "trigger": "available-now",
        "sources": {"events": {"format": "kafka", "schema": "infer", "required": ["id"],
                               "options": {"kafka.bootstrap.servers": broker.bootstrap,
                                           "subscribe": topic, "startingOffsets": "earliest"}}},
        "flows": {"events": {"sql": "SELECT * FROM events", "sink": {"table": "events"}}},
    }  # fmt: skip
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(spec))
    # "key" is also a column of Kafka's records: the record's own field wins, unambiguous.
    produce(topic, [json.dumps({"id": f"k{i}", "key": "a", "n": i}).encode() for i in range(6)])
    app, pipeline = load_pipeline(tmp_path / "streamsmith.yml")
    run_pipeline(spark, build_plan(app, pipeline))
    produce(topic, [json.dumps({"id": "k6", "n": 6, "tag": "new"}).encode(), b"[1, 2]"])
    app, pipeline = load_pipeline(tmp_path / "streamsmith.yml")
    run_pipeline(spark, build_plan(app, pipeline))
    root = tmp_path / "data"
    stored = versions(schema_dir(root, "stream", "events"))
    assert [v.ddl for v in stored] == [
        "id string, key string, n bigint",
        "id string, key string, n bigint, tag string",
    ]
    assert stored[0].sample == tuple(f"{topic}-{p}" for p in range(3))
    assert stored[1].reason.startswith(f"new field(s) tag in kafka://{topic}/")
    table = {
        row.id: (row.key, row.tag)
        for row in read_table(spark, table_path(root, "events")).collect()
    }
    assert table == {**{f"k{i}": ("a", None) for i in range(6)}, "k6": (None, "new")}
    rejected = read_table(spark, table_path(root, "events_quarantine")).collect()
    assert [(row.reason, row.raw) for row in rejected] == [("malformed JSON value", "[1, 2]")]


def test_none_leaves_new_fields_out_and_counts_them(spark: SparkSession, tmp_path: Path) -> None:
    folder = feed_project(
        tmp_path, "lenient", schema="id string, n bigint", schema_evolution="none"
    )
    lines = [{"id": "a", "n": 1}, {"id": "b", "n": 2, "x": 1}, {"id": "c", "n": "3", "y": {}}]
    (folder / "part-0.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    app, pipeline = load_pipeline(tmp_path / "streamsmith.yml")
    run_pipeline(spark, build_plan(app, pipeline, Trigger("available-now")))
    root = tmp_path / "data"
    table = read_table(spark, table_path(root, "events"))
    assert table.columns == ["id", "n", RESCUED]
    rows = {row.id: row for row in table.collect()}
    assert sorted(rows) == ["a", "b", "c"] and rows["b"][RESCUED] is None  # x left out
    assert json.loads(rows["c"][RESCUED])["n"] == "3"  # a mistyped value is still kept
    (status,) = [s for s in query_statuses(read_events(root)) if s.query == "lenient.events"]
    assert status.expectations == {"known_fields": {"passed": 1, "failed": 2}}


def test_a_variant_column_keeps_every_record_whole(spark: SparkSession, tmp_path: Path) -> None:
    """``variant``: each record as a VARIANT column, beside the typed ones or alone, so no
    change of shape ever loses data; ``variant_get`` reads any field of it."""
    folder = feed_project(tmp_path, "whole", schema="id string", variant="doc")
    lines = [{"id": "a", "n": 1}, {"id": "b", "n": 2.5, "geo": {"lat": 1}}]
    (folder / "part-0.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n{bad\n")
    app, pipeline = load_pipeline(tmp_path / "streamsmith.yml")
    run_pipeline(spark, build_plan(app, pipeline, Trigger("available-now")))
    root = tmp_path / "data"
    table = read_table(spark, table_path(root, "events"))
    assert table.columns == ["id", "doc"]
    got = table.selectExpr(
        "id",
        "variant_get(doc, '$.n', 'double') AS n",
        "variant_get(doc, '$.geo.lat', 'int') AS lat",
    ).collect()
    assert sorted(tuple(row) for row in got) == [("a", 1.0, None), ("b", 2.5, 1)]
    rejected = read_table(spark, table_path(root, "events_quarantine")).collect()
    assert [row.reason for row in rejected] == ["malformed JSON value"]

    alone = tmp_path / "alone"
    alone.mkdir()
    feed_project(alone, "alone", schema=None, required=[], variant="doc")
    (alone / "data/input/events/part-0.jsonl").write_text(json.dumps(lines[1]) + "\n")
    app, pipeline = load_pipeline(alone / "streamsmith.yml")
    run_pipeline(spark, build_plan(app, pipeline, Trigger("available-now")))
    only = read_table(spark, table_path(alone / "data", "events"))
    assert only.columns == ["doc"]
    assert only.selectExpr("variant_get(doc, '$.geo.lat', 'int')").first()[0] == 1


def test_prefix_integrity_holds_across_a_schema_change(spark: SparkSession, tmp_path: Path) -> None:
    """The harness evolves each split's schema as the supervisor would: the stream that
    met a new field midway equals the backfill of the same input under the final one."""
    folder = feed_project(tmp_path, "growing")
    (folder / "sample.jsonl").write_text(json.dumps({"id": "s", "n": 0}) + "\n")
    app, _ = load_pipeline(tmp_path / "streamsmith.yml")  # version 0 from the sample
    records = [json.dumps({"id": f"r{i}", "n": i}).encode() for i in range(6)]
    records += [
        json.dumps({"id": f"g{i}", "n": i, "geo": {"lat": i / 2}}).encode() for i in range(3)
    ]
    records += [json.dumps({"id": f"c{i}", "n": i, "city": "Oslo"}).encode() for i in range(3)]
    report = check_prefix_integrity(spark, app, records, root=tmp_path / "integrity", splits=2,
                                    max_chunks=4)  # fmt: skip
    report.assert_ok()
    for split in ("split-000", "split-001"):
        stored = versions(schema_dir(tmp_path / "integrity" / split, "growing", "events"))
        assert stored[0].ddl == "id string, n bigint"
        assert stored[-1].ddl.startswith("id string, n bigint, ")  # grew by geo and city
        assert {"geo struct<lat:double>", "city string"} <= set(stored[-1].ddl.split(", "))
