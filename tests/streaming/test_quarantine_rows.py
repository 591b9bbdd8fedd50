"""What a user finds in a quarantine after `streamsmith run` (in-process): for every
reason, the line as it arrived and its line number in its file, and a reason that names
the field when the JSON is well formed but a value does not fit its type (issue 39,
items 2 and 3)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
import yaml
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from inprocess import in_project, invoke

SPEC = {
    "name": "flights",
    "storage_root": "data",
    "sources": {
        "flights": {
            "format": "jsonl",
            "path": "input/flights",
            "schema": "flight string, date timestamp, delay int",
            "required": ["flight"],
            "options": {"timestampFormat": "yyyy/MM/dd HH:mm"},
        }
    },
    "flows": {
        "on_time": {
            "source": "flights",
            "sql": "SELECT flight, date, delay FROM flights",
            "expect": {"carrier": {"sql": "flight LIKE 'AA%'", "action": "quarantine"}},
            "sink": {"table": "on_time"},
        }
    },
}
LINES = [
    '{"flight": "AA1", "date": "2001/01/06 15:01", "delay": 5}',
    '{"flight": "AA2", "date": "2001/13/45 99:99", "delay": 1}',
    '{"flight": "AA3", "date": "2001/01/06 16:00", "delay": "n/a"}',
    '{"date": "2001/01/06 17:00", "delay": 2}',
    "",
    '{"flight": "XX9",   "date": "2001/01/06 18:00", "delay": 3}',
    '{"flight": "AA4", "date": "2001/01/06 19:00"',
    '{"flight": "AA5", "date": "2001/01/06 20:00", "delay": 0}',
]


def rows_of(table: Path) -> list[dict[str, object]]:
    """A lake table's rows (Delta, the default format), read without Spark."""
    rows: list[dict[str, object]] = DeltaTable(str(table)).to_pyarrow_table().to_pylist()
    return rows


def rows(folder: Path) -> list[dict[str, object]]:
    """The table's rows by flight, timestamps as Spark shows them (UTC, no zone)."""
    naive = [
        {k: v.replace(tzinfo=None) if isinstance(v, datetime) else v for k, v in row.items()}
        for row in rows_of(folder)
    ]
    return sorted(naive, key=lambda row: str(row.get("flight")))


def test_quarantine_rows_hold_the_line_as_it_arrived_its_number_and_the_field(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_project(monkeypatch, tmp_path)
    inbox = tmp_path / "data/input/flights"
    inbox.mkdir(parents=True)
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(SPEC))
    (inbox / "2001-01.jsonl").write_text("\n".join(LINES) + "\n")

    result = invoke("run", "--trigger", "available-now")

    assert result.returncode == 0, result.stderr
    table = rows(tmp_path / "data/tables/on_time")
    assert [(row["flight"], str(row["date"]), row["delay"]) for row in table] == [
        ("AA1", "2001-01-06 15:01:00", 5),
        ("AA5", "2001-01-06 20:00:00", 0),
    ]
    quarantine = rows_of(tmp_path / "data/tables/on_time_quarantine")
    found = sorted((row["position"], row["reason"], row["raw"]) for row in quarantine)
    assert found == [
        ("2", 'field date: "2001/13/45 99:99" is not a timestamp (format yyyy/MM/dd HH:mm)',
         LINES[1]),
        ("3", 'field delay: "n/a" is not an int', LINES[2]),
        ("4", "missing or invalid field flight", LINES[3]),
        ("6", "expectation carrier failed", LINES[5]),
        ("7", "malformed JSON line", LINES[6]),
    ]  # fmt: skip
    assert all(row["source_file"].endswith("2001-01.jsonl") for row in quarantine)

    # A backfill over the same input finds the same lines and numbers.
    result = invoke("backfill")
    assert result.returncode == 0, result.stderr
    backfilled = rows_of(tmp_path / "data/backfill/on_time_quarantine")
    assert sorted((row["position"], row["reason"], row["raw"]) for row in backfilled) == found
