"""``streamsmith table convert``: a Parquet table an earlier version wrote becomes a Delta
table in place, holding committed batches only, and its stream resumes on the same
checkpoint with a Delta sink: no batch lost, none written twice, even one the file sink
committed and the checkpoint did not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

from inprocess import invoke
from streamsmith.config import Trigger
from streamsmith.errors import UserError
from streamsmith.io.lake import read_table, table_path
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import run_pipeline

SPEC = {
    "name": "orders",
    "storage_root": "data",
    "sources": {"orders": {"format": "jsonl", "path": "input", "schema": "id int, amount int"}},
    "flows": {
        "kept": {
            "source": "orders",
            "sql": "SELECT id, amount, amount > 1 AS big FROM orders WHERE amount > 0",
            "sink": {"table": "kept", "format": "parquet", "partition_by": ["big"]},
        },
    },
}


def deliver(root: Path, number: int) -> None:
    lines = [json.dumps({"id": number * 10 + i, "amount": i - 1}) for i in range(4)]
    (root / "data/input" / f"{number}.jsonl").write_text("\n".join(lines) + "\n")


def catch_up(spark: SparkSession, spec_file: Path, sink_format: str) -> None:
    app, spec = load_pipeline(spec_file, sets=(f"flows.kept.sink.format={sink_format}",))
    run_pipeline(spark, build_plan(app, spec, Trigger("available-now")))


def test_a_converted_table_keeps_committed_batches_and_its_stream_resumes_exactly_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    spec_file = tmp_path / "streamsmith.yml"
    spec_file.write_text(yaml.safe_dump(SPEC))
    (tmp_path / "data/input").mkdir(parents=True)
    table = table_path(tmp_path / "data", "kept")
    for number in range(2):  # two batches through Spark's file sink
        deliver(tmp_path, number)
        catch_up(spark, spec_file, "parquet")
    # A batch killed before its commit left a file the file sink's log never listed.
    committed = sorted(table.rglob("*.parquet"))[0]
    shutil.copy(committed, committed.with_name("part-99999-killed.c000.snappy.parquet"))
    # The crash between the file sink's commit and the checkpoint's: batch 1 replays.
    checkpoint = tmp_path / "data/checkpoints/orders/kept"
    (checkpoint / "commits/1").unlink()

    converted = invoke("table", "convert", "kept", "--root", str(tmp_path / "data"))
    assert converted.returncode == 0, converted.stderr
    # The CONVERT commit (readVersion -1) is in the history (delta-rs refused to read it)
    shown = invoke("table", "history", "kept", "--root", str(tmp_path / "data"), "--format",
                   "json")  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert [json.loads(line)["operation"] for line in shown.stdout.splitlines()] == [
        "WRITE",
        "CONVERT",
    ]
    assert "kept: a Delta table of 4 files, partitioned by big" in converted.stdout
    assert "resumes after batch 1 once its sink says format: delta" in converted.stdout
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(str(table)).collect())
    assert rows == [(2, 1, False), (3, 2, True), (12, 1, False), (13, 2, True)]

    # The old sink would write Parquet files beside the Delta log: refused.
    with pytest.raises(UserError, match=r"is a Delta table now .* set format: delta"):
        catch_up(spark, spec_file, "parquet")

    deliver(tmp_path, 2)
    catch_up(spark, spec_file, "delta")  # replays batch 1 (skipped), then batch 2
    final = sorted(tuple(r) for r in read_table(spark, table).collect())
    assert final == [(n * 10 + i + 1, i, i > 1) for n in range(3) for i in (1, 2)]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
    operations = [row.operation for row in sorted(history, key=lambda row: row.version)]
    assert operations == ["CONVERT", "WRITE", "WRITE"]  # batch 2, appended and marked
