"""One aggregate written to PostgreSQL (update: every window, as it changes) and to a
Delta table (append: finalised windows), as a user runs it: a spec file and the command
line. One quarantine, and the expectation counted once."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from pyspark.sql import SparkSession
from test_side_queries import ACTION_COUNTS
from typer.testing import CliRunner

from streamsmith.cli import cli
from streamsmith.config import Trigger
from streamsmith.io.lake import backfill_path, read_table, table_path
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import build_plan
from streamsmith.testing import ChunkRunner

SPEC = {
    "name": "actions",
    "storage_root": "data",
    "trigger": "available-now",
    "sources": {
        "actions": {
            "format": "jsonl",
            "path": "input/actions",
            "schema": "action string, ts timestamp",
        }
    },
    "flows": {
        "action_counts": {
            **ACTION_COUNTS,
            "sinks": {
                "serving": {"format": "postgres", "table": "action_counts",
                            "output_mode": "update", "key": ["action", "window_start"]},
                "lake": {"format": "delta", "table": "action_counts", "output_mode": "append"},
            },
        }
    },
}  # fmt: skip
LINES = [
    '{"action": "open", "ts": "2026-11-25T10:05:00Z"}',
    '{"action": "close", "ts": "2026-11-25T10:10:00Z"}',
    '{"action": "open", "ts": "2026-11-25T10:20:00Z"}',
    '{"action": "jump", "ts": "2026-11-25T10:30:00Z"}',  # fails known_action: quarantined
    '{"action": "open", "ts": "2026-11-25T11:05:00Z"}',
    '{"action": "close", "ts": "2026-11-25T12:30:00Z"}',  # the watermark reaches 12:20
    '{"action": "open", "ts": ',  # malformed: quarantined
]
HOUR = {hour: datetime(2026, 11, 25, hour) for hour in (10, 11, 12, 13)}  # the session's UTC


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def counts_in(dsn: str) -> list[tuple[Any, ...]]:
    """The table's rows, window starts as the lake's (timestamptz read back as UTC)."""
    with psycopg.connect(dsn) as conn:
        query = "SELECT action, window_start, count FROM action_counts ORDER BY 2, 1"
        rows = conn.execute(query).fetchall()
    return [(action, start.astimezone(UTC).replace(tzinfo=None), n) for action, start, n in rows]


def lake_rows(spark: SparkSession, path: Path) -> list[tuple[Any, ...]]:
    rows = read_table(spark, path).select("action", "window_start", "count").collect()
    return sorted((tuple(row) for row in rows), key=lambda row: (row[1], row[0]))


def test_one_aggregate_to_postgres_in_update_mode_and_delta_in_append_mode(
    spark: SparkSession, tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMSMITH_PG_DSN", pg_dsn)
    monkeypatch.delenv("STREAMSMITH_ROOT", raising=False)
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(SPEC, sort_keys=False))
    folder = tmp_path / "data/input/actions"
    folder.mkdir(parents=True)
    (folder / "part-0.jsonl").write_text("\n".join(LINES) + "\n")
    spec = str(tmp_path / "streamsmith.yml")
    root = tmp_path / "data"

    plan = invoke("dry-run", spec)
    assert "query actions.action_counts: sink serving: postgres table" in plan
    assert "query actions.action_counts.lake: sink lake: delta" in plan

    ran = invoke("run", spec, "--trigger", "available-now")
    # Every window, as it changed, in PostgreSQL; only the windows the watermark (12:20)
    # closed in the lake; each sink's rows written on its own line.
    assert counts_in(pg_dsn) == [
        ("close", HOUR[10], 1), ("open", HOUR[10], 2), ("open", HOUR[11], 1),
        ("close", HOUR[12], 1),
    ]  # fmt: skip
    assert lake_rows(spark, table_path(root, "action_counts")) == [
        ("close", HOUR[10], 1), ("open", HOUR[10], 2), ("open", HOUR[11], 1),
    ]  # fmt: skip
    assert "actions.action_counts: 2 batches, 7 records read, 4 rows written" in ran
    assert "actions.action_counts.lake: 2 batches, 7 records read, 3 rows written" in ran

    # One quarantine, named after the first sink's table, with both rejects.
    tables = sorted(path.name for path in (root / "tables").iterdir())
    assert [name for name in tables if "quarantine" in name] == ["action_counts_quarantine"]
    quarantine = read_table(spark, table_path(root, "action_counts_quarantine")).collect()
    assert sorted(row.reason.split(":")[0] for row in quarantine) == [
        "expectation known_action failed",
        "malformed JSON line",
    ]

    # The expectation is counted once, by the first sink's query.
    statuses = {
        row["query"]: row
        for row in map(json.loads, invoke("status", spec, "--format", "json").splitlines())
    }
    assert set(statuses) == {
        "actions.action_counts",
        "actions.action_counts.lake",
        "actions.action_counts.quarantine",
        "actions.action_counts.late",
    }
    assert statuses["actions.action_counts"]["expectations"] == {
        "known_action": {"passed": 5, "failed": 1}
    }
    others = [row for name, row in statuses.items() if name != "actions.action_counts"]
    assert [row["expectations"] for row in others] == [{}, {}, {}]
    assert statuses["actions.action_counts.quarantine"]["quarantined"] == 2


LATER = [
    '{"action": "open", "ts": "2026-11-25T10:15:00Z"}',  # late: the watermark is at 12:20
    '{"action": "close", "ts": "2026-11-25T13:40:00Z"}',  # the watermark reaches 13:30
]


@pytest.mark.deep
def test_several_sinks_through_a_hop_a_backfill_a_second_catch_up_and_a_full_refresh(
    spark: SparkSession, tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMSMITH_PG_DSN", pg_dsn)
    monkeypatch.delenv("STREAMSMITH_ROOT", raising=False)
    document = copy.deepcopy(SPEC)
    # A flow reading the table the further (Delta) sink writes, as a stream.
    document["flows"]["opened"] = {
        "source": "action_counts",
        "sql": "SELECT window_start, count FROM action_counts WHERE action = 'open'",
        "sink": {"table": "opened"},
    }
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(document, sort_keys=False))
    folder = tmp_path / "data/input/actions"
    folder.mkdir(parents=True)
    (folder / "part-0.jsonl").write_text("\n".join(LINES) + "\n")
    spec = str(tmp_path / "streamsmith.yml")
    root = tmp_path / "data"

    def opened(path: Path) -> list[tuple[Any, ...]]:
        return sorted(tuple(row) for row in read_table(spark, path).collect())

    invoke("run", spec)
    assert opened(table_path(root, "opened")) == [(HOUR[10], 2), (HOUR[11], 1)]

    # A backfill: each sink's own lake table of every window, and the hop reading the
    # further sink's backfill.
    backfilled = invoke("backfill", spec)
    every_window = [
        ("close", HOUR[10], 1), ("open", HOUR[10], 2), ("open", HOUR[11], 1),
        ("close", HOUR[12], 1),
    ]  # fmt: skip
    assert lake_rows(spark, backfill_path(root, "action_counts")) == every_window
    assert lake_rows(spark, backfill_path(root, "action_counts__lake")) == every_window
    assert opened(backfill_path(root, "opened")) == [(HOUR[10], 2), (HOUR[11], 1)]
    assert "action_counts__lake: 4 rows" in backfilled

    # A second catch-up: the late event is recorded once, not counted by either sink.
    (folder / "part-1.jsonl").write_text("\n".join(LATER) + "\n")
    invoke("run", spec)
    assert counts_in(pg_dsn) == [
        ("close", HOUR[10], 1), ("open", HOUR[10], 2), ("open", HOUR[11], 1),
        ("close", HOUR[12], 1), ("close", HOUR[13], 1),
    ]  # fmt: skip
    assert lake_rows(spark, table_path(root, "action_counts")) == every_window
    assert read_table(spark, table_path(root, "action_counts_late")).count() == 1
    statuses = {
        row["query"]: row
        for row in map(json.loads, invoke("status", spec, "--format", "json").splitlines())
    }
    assert statuses["actions.action_counts"]["expectations"] == {
        "known_action": {"passed": 7, "failed": 1}
    }
    assert statuses["actions.action_counts.lake"]["expectations"] == {}
    assert statuses["actions.action_counts.late"]["late"] == 1

    # A full refresh empties both sinks and runs over all input again: one batch, in
    # which nothing is late.
    refreshed = invoke("run", spec, "--full-refresh")
    assert "full refresh: removed postgres table public.action_counts" in refreshed
    assert counts_in(pg_dsn) == [
        ("close", HOUR[10], 1), ("open", HOUR[10], 3), ("open", HOUR[11], 1),
        ("close", HOUR[12], 1), ("close", HOUR[13], 1),
    ]  # fmt: skip
    assert lake_rows(spark, table_path(root, "action_counts")) == [
        ("close", HOUR[10], 1), ("open", HOUR[10], 3), ("open", HOUR[11], 1),
        ("close", HOUR[12], 1),
    ]  # fmt: skip
    assert opened(table_path(root, "opened")) == [(HOUR[10], 3), (HOUR[11], 1)]


@pytest.mark.deep
def test_several_sinks_always_on(
    spark: SparkSession, tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queries as an always-on run starts them (a micro-batch per arrival), the late
    event found by the one late-events query."""
    monkeypatch.setenv("STREAMSMITH_PG_DSN", pg_dsn)
    monkeypatch.delenv("STREAMSMITH_ROOT", raising=False)
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(SPEC, sort_keys=False))
    app, spec = load_pipeline(tmp_path / "streamsmith.yml")
    root = tmp_path / "data"
    with ChunkRunner(spark, build_plan(app, spec, Trigger("interval", 0.0))) as runner:
        assert [output.query_name for output, _ in runner.queries] == [
            "actions.action_counts",
            "actions.action_counts.lake",
            "actions.action_counts.quarantine",
            "actions.action_counts.late",
        ]
        runner.send([line.encode() for line in LINES])
        runner.send([line.encode() for line in LATER])
    assert counts_in(pg_dsn) == [
        ("close", HOUR[10], 1), ("open", HOUR[10], 2), ("open", HOUR[11], 1),
        ("close", HOUR[12], 1), ("close", HOUR[13], 1),
    ]  # fmt: skip
    # The windows the watermark closed; the 12:00 one once a batch after 13:40 runs.
    closed = [("close", HOUR[10], 1), ("open", HOUR[10], 2), ("open", HOUR[11], 1)]
    lake = lake_rows(spark, table_path(root, "action_counts"))
    assert lake in (closed, [*closed, ("close", HOUR[12], 1)])
    assert read_table(spark, table_path(root, "action_counts_late")).count() == 1
    assert read_table(spark, table_path(root, "action_counts_quarantine")).count() == 2
