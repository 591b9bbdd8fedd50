"""``streamsmith table history``: one line per version by default (version, time,
operation, rows in and out, which query wrote it); a MERGE's predicates and metrics only
with ``--details`` or in ``--format json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from streamsmith.cli import cli
from streamsmith.cli.common import out
from streamsmith.io.delta import create_table, merge_batch
from streamsmith.io.lake import table_path
from streamsmith.runtime.checkpoint_files import query_names_by_id


def history(root: Path, *more: str) -> str:
    result = CliRunner().invoke(cli, ["table", "history", "totals", "--root", str(root), *more])
    assert result.exit_code == 0, result.output
    return result.output


def test_each_version_is_one_line_and_the_merge_details_are_asked_for(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = table_path(tmp_path, "totals")
    schema = "customer string, n bigint"
    create_table(spark, path, spark.createDataFrame([], schema).schema)
    app_id = "streamsmith:shop:shop.totals"  # as a flow's update-mode query merges
    merge_batch(spark.createDataFrame([("ann", 1), ("bob", 2)], schema), path, ["customer"],
                app_id, 0)  # fmt: skip
    merge_batch(spark.createDataFrame([("ann", 3), ("cid", 1)], schema), path, ["customer"],
                app_id, 1)  # fmt: skip

    rows = history(tmp_path, "--format", "csv").splitlines()
    assert rows[0] == "version,timestamp,operation,rows_in,rows_out,by,schema"
    assert [row.split(",")[2:6] for row in rows[1:]] == [
        ["MERGE", "2", "+1 ~1 -0", "shop.totals"],
        ["MERGE", "2", "+2 ~0 -0", "shop.totals"],
        ["CREATE TABLE", "", "", ""],
    ]
    monkeypatch.setattr(out, "width", 120)  # a terminal 120 columns wide
    shown = history(tmp_path).splitlines()  # a table: a line per version
    assert len(shown) == 1 + 3 + 3 + 1 and "│ 2       │" in shown[4]
    assert "predicate" not in "".join(shown)

    detailed = history(tmp_path, "--format", "csv", "--details").splitlines()
    assert detailed[0].endswith(",schema,parameters,metrics") and "predicate" in detailed[1]
    (newest, *_) = [json.loads(line) for line in history(tmp_path, "--format", "json").splitlines()]
    assert newest["by"] == "shop.totals" and newest["rows_out"] == "+1 ~1 -0"
    assert "predicate" in newest["parameters"]
    assert newest["metrics"]["numTargetRowsUpdated"] == "1"


def test_a_streaming_append_is_named_by_the_checkpoint_holding_its_query_id(
    tmp_path: Path,
) -> None:
    """Delta's streaming sink records only the query's id: the checkpoints name it."""
    for folder, query_id in (("shop/cleaned", "a1"), ("shop/cleaned__quarantine", "b2")):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "metadata").write_text(json.dumps({"id": query_id}))
    assert query_names_by_id(tmp_path) == {"a1": "shop.cleaned", "b2": "shop.cleaned.quarantine"}
