"""A kind of source added as one module: Spark's rate source, in a pipeline of your own."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

from streamsmith.config import Trigger
from streamsmith.errors import UserError
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.describe import describe_plan
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.start import start_queries
from waiting import wait_for

SPEC = {
    "name": "ticks",
    "storage_root": "data",
    "sources": {"ticks": {"format": "rate", "options": {"rowsPerSecond": 50}}},
    "flows": {
        "even": {
            "source": "ticks",
            "sql": "SELECT value FROM ticks WHERE value % 2 = 0",
            "sink": {"format": "memory", "table": "even_ticks"},
        }
    },
}


def test_a_rate_source_feeds_a_flow(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "streamsmith.yml"
    path.write_text(yaml.safe_dump(SPEC))
    app, spec = load_pipeline(path)
    plan = build_plan(app, spec, Trigger("interval", 0.0))
    assert "source ticks: rate (rowsPerSecond=50)" in describe_plan(plan)
    assert [output.kind for output in plan.outputs] == ["memory"]  # nothing to quarantine
    queries = start_queries(spark, plan)
    try:  # rows appear as time passes: wait for a few batches' worth
        wait_for(lambda: spark.table("even_ticks").count() >= 10, "ten even ticks", every_s=1)
        for _, query in queries:
            query.processAllAvailable()
        values = sorted(row.value for row in spark.table("even_ticks").collect())
    finally:
        for _, query in queries:
            query.stop()
    assert values and values == list(range(0, values[-1] + 1, 2))  # every even tick, once

    wrong = {"ticks": {"format": "rate", "options": {"rows": 5}}}
    path.write_text(yaml.safe_dump({**SPEC, "sources": wrong}))
    app, spec = load_pipeline(path)
    with pytest.raises(UserError, match="a rate source has no option"):
        build_plan(app, spec)
