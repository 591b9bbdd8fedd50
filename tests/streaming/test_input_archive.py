"""``sources.<name>.archive``: a file moves out of the source's directory once every query
reading it has committed it, as a user runs ``streamsmith run`` and ``backfill``: a
disabled flow holds back what it has not read once it has run, never before, and the
backfill reads the archive beside the directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from shop import deliver, shop_spec, write_project
from streamsmith.cli import cli
from streamsmith.monitor.eventlog import read_events


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def table_rows(path: Path) -> list[tuple[Any, ...]]:
    content = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    return sorted(tuple(row.values()) for row in content)


def names(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_files_every_reader_committed_move_to_the_archive_and_backfill_reads_both(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = shop_spec()
    spec["sources"]["raw"]["archive"] = "archive/raw"
    spec["flows"]["big"] = {"source": "raw", "sql": "SELECT order_id FROM raw WHERE amount > 6",
                            "sink": {"table": "big"}, "enabled": False}  # fmt: skip
    path = str(write_project(tmp_path, spec))
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    run = ("run", path, "--trigger", "available-now")
    deliver(tmp_path, 0, [("o1", "ann", 10), ("o2", "bob", 5)])
    (data / "input/2026-11-27").mkdir()
    (data / "input/2026-11-27/part-1.jsonl").write_text('{"order_id": "o3", "customer": "ann", '
                                                        '"amount": 7}\nnot json\n')  # fmt: skip

    # Read by the table's and the quarantine's queries: both files move, their subfolder
    # kept. Flow big never ran: it holds nothing back.
    invoke(*run)
    assert names(data / "input") == []
    assert names(data / "archive/raw") == ["2026-11-27/part-1.jsonl", "part-0.jsonl"]
    archived = [e for e in read_events(data, "shop") if e["event"] == "input_archived"]
    assert [(e["source"], e["files"]) for e in archived] == [("raw", 2)]
    assert table_rows(data / "tables/orders") == [("o1", "ann", 10), ("o2", "bob", 5),
                                                  ("o3", "ann", 7)]  # fmt: skip
    quarantine = DeltaTable(str(data / "tables/orders_quarantine")).to_pyarrow_table()
    assert [row["raw"] for row in quarantine.to_pylist()] == ["not json"]

    # Flow big, enabled, starts from what is left; the old files are not read again.
    deliver(tmp_path, 2, [("o4", "cid", 8)])
    invoke(*run, "--set", "flows.big.enabled=true")
    assert table_rows(data / "tables/big") == [("o4",)]
    assert len(table_rows(data / "tables/orders")) == 4
    assert names(data / "input") == []

    # Switched off again, big has run: the file it has not read stays until it has.
    deliver(tmp_path, 3, [("o5", "eve", 9)])
    invoke(*run)
    assert len(table_rows(data / "tables/orders")) == 5
    assert names(data / "input") == ["part-3.jsonl"]
    invoke(*run, "--set", "flows.big.enabled=true")
    assert table_rows(data / "tables/big") == [("o4",), ("o5",)]
    assert names(data / "input") == []
    assert len(names(data / "archive/raw")) == 4

    # The backfill reads the archive beside the source's directory.
    deliver(tmp_path, 4, [("o6", "fay", 1)])
    invoke("backfill", path)
    backfilled = spark.read.format("delta").load(str(data / "backfill/orders"))
    assert sorted(r.order_id for r in backfilled.collect()) == ["o1", "o2", "o3", "o4", "o5", "o6"]

    # A full refresh starts every reader over: the archived files move back, are read
    # again, and move out again.
    output = invoke(*run, "--full-refresh", "--set", "flows.big.enabled=true")
    assert "source raw: 4 archived files moved back to" in output
    assert sorted(row[0] for row in table_rows(data / "tables/orders")) == [
        "o1", "o2", "o3", "o4", "o5", "o6"
    ]  # fmt: skip
    assert table_rows(data / "tables/big") == [("o1",), ("o3",), ("o4",), ("o5",)]
    assert names(data / "input") == [] and len(names(data / "archive/raw")) == 5
