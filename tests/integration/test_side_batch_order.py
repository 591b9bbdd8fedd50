"""A flow's side queries never commit a batch ahead of its main query (issue 52, item 4).

A CDC flow's batch fails (a change without its sequence, once ``required`` was loosened
with ``--set``); the user puts ``required`` back and runs again. The quarantine query
must not have committed that batch in the failed run, or the record the retry rejects
goes nowhere: ``read = written + quarantined`` must hold after the failure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

from inprocess import in_project, invoke
from streamsmith.io.lake import read_table

SPEC = {
    "name": "crm",
    "storage_root": "data",
    "sources": {
        "changes": {"format": "jsonl", "path": "input/changes",
                    "schema": "id int, name string, seq long", "required": ["seq"]},
    },
    "flows": {
        "customers": {
            "source": "changes", "sql": "SELECT * FROM changes",
            "cdc": {"keys": ["id"], "sequence_by": "seq", "scd_type": 1},
            "sink": {"format": "delta", "table": "customers"},
        },
    },
    "supervisor": {"max_retries": 0},
}  # fmt: skip


def test_a_record_rejected_on_the_retry_of_a_failed_batch_is_quarantined(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    changes = [{"id": i % 20, "name": f"name-{i}", "seq": i} for i in range(1, 251)]
    changes.insert(100, {"id": 3, "name": "no sequence"})
    (tmp_path / "input/changes").mkdir(parents=True)
    lines = "".join(json.dumps(change) + "\n" for change in changes)
    (tmp_path / "input/changes/a.jsonl").write_text(lines)
    (tmp_path / "spec.yml").write_text(yaml.safe_dump(SPEC))
    run = ("run", "spec.yml", "--trigger", "available-now")
    in_project(monkeypatch, tmp_path)

    failed = invoke(*run, "--set", "sources.changes.required=[]")
    assert failed.returncode == 1, failed.stderr
    assert "cdc.sequence_by 'seq' is null" in failed.stderr

    retried = invoke(*run)
    assert retried.returncode == 0, retried.stderr
    assert "251 records read, 250 rows written" in retried.stdout, retried.stdout
    assert "crm.customers.quarantine: 1 batches, 1 records quarantined" in retried.stdout
    quarantine = read_table(spark, tmp_path / "data/tables/customers_quarantine").collect()
    assert len(quarantine) == 1
    assert "no sequence" in str(quarantine[0].asDict())
    assert read_table(spark, tmp_path / "data/tables/customers").count() == 20
