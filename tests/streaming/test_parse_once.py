"""A JSON-lines source read as a batch (a backfill) and filtered on a parsed field: each
line is parsed once, and the filter sees what the parse made of it."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from streamsmith.config import SourceSpec
from streamsmith.io.files import read_files

SCHEMA = StructType(
    [StructField("event_type", StringType()), StructField("ad_id", StringType()),
     StructField("n", LongType())]
)  # fmt: skip


def test_a_filter_on_a_parsed_field_parses_each_line_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    kinds = ["view", "click", "view", "view"]
    lines = [
        json.dumps({"event_type": kind, "ad_id": f"a{i}", "n": i}) for i, kind in enumerate(kinds)
    ]
    (tmp_path / "events.jsonl").write_text("\n".join([*lines, "{not json", '{"n": "x"}']) + "\n")
    frame = read_files(spark, SourceSpec(format="jsonl", path=str(tmp_path)), str(tmp_path), SCHEMA,
                       streaming=False)  # fmt: skip
    views = frame.where(F.col("event_type") == "view").select("ad_id", "n")
    plan = views._jdf.queryExecution().optimizedPlan().toString()
    assert "from_json" not in plan and "numbered-json-lines" in plan, plan
    assert sorted(views.collect()) == [("a0", 0), ("a2", 2), ("a3", 3)]
    rejected = frame.where(F.col("_read_error").isNotNull()).select("_raw").collect()
    assert sorted(row[0] for row in rejected) == ['{"n": "x"}', "{not json"]
