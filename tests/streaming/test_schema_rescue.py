"""A feed that changes shape under ``schema_evolution: rescue``: what the schema lacks, and
values of the wrong type, stay in the row's ``_rescued_data``; nothing is quarantined for
that alone, and every record is in the table or the quarantine."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from pyspark.sql import SparkSession

from streamsmith.config import Trigger
from streamsmith.io.lake import read_table, table_path
from streamsmith.io.schema_store import versions
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import run_pipeline
from streamsmith.schemas.ddl import parse_schema
from streamsmith.transforms.events import RESCUED, RecordParser
from streamsmith.transforms.quarantine import REJECT_REASON


def test_kafka_shaped_records_keep_what_the_schema_lacks(spark: SparkSession) -> None:
    records = [
        ('{"id": "a", "n": 1}', 10),
        ('{"id": "b", "n": "two", "new": {"x": [1]}}', 11),
        ('{"id": "c", "n": null, "flag": true}', 12),
        ('{"id": "d"', 13),
        ('{"n": 5}', 14),
    ]
    frame = spark.createDataFrame(
        [(value.encode(), "kafka://t/0", str(offset), value, None) for value, offset in records],
        "value binary, _source_file string, _position string, _raw string, _read_error string",
    )
    parse = RecordParser(parse_schema("id string, n int"), ("id",), rescue=True)
    rows = {row.id or row._raw: row for row in parse(frame).collect()}
    assert rows["a"][RESCUED] is None and rows["a"][REJECT_REASON] is None
    assert json.loads(rows["b"][RESCUED]) == {
        "n": "two",
        "new": '{"x":[1]}',
        "_file_path": "kafka://t/0",
        "_position": "11",
    }
    assert rows["b"].n is None and rows["b"][REJECT_REASON] is None  # rescued, not rejected
    assert json.loads(rows["c"][RESCUED])["flag"] == "true"  # a JSON null is no mismatch
    assert "n" not in json.loads(rows["c"][RESCUED])
    assert rows['{"id": "d"'][REJECT_REASON] == "malformed JSON value"
    assert rows['{"n": 5}'][REJECT_REASON] == "missing or invalid field id"


def test_an_inferred_jsonl_feed_gains_a_field_and_changes_a_type(
    spark: SparkSession, tmp_path: Path
) -> None:
    spec = {
        "name": "feed",
        "storage_root": "data",
        "sources": {"events": {"format": "jsonl", "path": "input/events", "schema": "infer",
                               "schema_evolution": "rescue", "required": ["id"]}},
        "flows": {"events": {"sql": "SELECT * FROM events", "sink": {"table": "events"}}},
    }  # fmt: skip
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(spec))
    folder = tmp_path / "data/input/events"
    folder.mkdir(parents=True)
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
    (version,) = versions(root, "feed", "events")  # inferred once, from the first delivery
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
