"""A catch-up starts no side query that has nothing to do: a flow's first catch-up, read
in one batch before any watermark, can drop nothing as late, so its late-events query
does not start; the table is there, empty, and a later catch-up records a late event
once, and none of the input read before the first watermark."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from streamsmith.cli import cli
from streamsmith.io.lake import read_table, table_path
from streamsmith.monitor.eventlog import read_events

# The phone actions' hourly counts: a quarantine expectation and a lateness (a late table).
ACTION_COUNTS = {
    "source": "actions",
    "sql": "SELECT action, window.start AS window_start, count(*) AS count "
    "FROM actions GROUP BY window, action",
    "event_time": {"column": "ts", "lateness": "10 minutes", "window": "1 hour"},
    "expect": {"known_action": {"sql": "action IN ('open', 'close')", "action": "quarantine"}},
}
SPEC = {
    "name": "actions",
    "storage_root": "data",
    "trigger": "available-now",
    "sources": {
        "actions": {"format": "jsonl", "path": "input/actions",
                    "schema": "action string, ts timestamp"}
    },
    "flows": {"action_counts": {**ACTION_COUNTS, "sink": {"table": "action_counts"}}},
}  # fmt: skip
LINES = [
    '{"action": "open", "ts": "2026-11-25T10:05:00Z"}',
    '{"action": "close", "ts": "2026-11-25T10:10:00Z"}',
    '{"action": "jump", "ts": "2026-11-25T10:30:00Z"}',  # fails known_action: quarantined
    '{"action": "close", "ts": "2026-11-25T12:30:00Z"}',  # the watermark reaches 12:20
    '{"action": "open", "ts": ',  # malformed: quarantined
]
LATER = [
    '{"action": "open", "ts": "2026-11-25T10:15:00Z"}',  # late: the watermark is at 12:20
    '{"action": "close", "ts": "2026-11-25T13:40:00Z"}',
]
LATE_QUERY = "actions.action_counts.late"


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def query_events(root: Path, query: str) -> list[tuple[str, object]]:
    """(event, batch id) of each event of ``query``, in order."""
    return [
        (str(e["event"]), e.get("batch_id"))
        for e in read_events(root, "actions")
        if e.get("query") == query
    ]


def test_a_first_catch_up_starts_no_late_events_query(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STREAMSMITH_ROOT", raising=False)
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(SPEC, sort_keys=False))
    folder = tmp_path / "input/actions"
    folder.mkdir(parents=True)
    (folder / "part-0.jsonl").write_text("\n".join(LINES) + "\n")
    root = tmp_path / "data"
    spec_file = str(tmp_path / "streamsmith.yml")

    first = invoke("run", spec_file)
    assert query_events(root, LATE_QUERY) == []
    assert "actions.action_counts.late: 0 batches, 0 late events recorded" in first
    late = read_table(spark, table_path(root, "action_counts_late"))
    assert late.columns == ["action", "ts", "windows_dropped", "watermark", "batch_id"]
    assert late.count() == 0
    assert read_table(spark, table_path(root, "action_counts_quarantine")).count() == 2
    # With nothing new, the next catch-up starts no Spark, late-events query or not.
    invoke("run", spec_file)
    ends = [e for e in read_events(root, "actions") if e["event"] == "run_finished"]
    assert [end.get("nothing_new") for end in ends] == [None, True]

    # The next catch-up runs under the watermark: its late-events query starts, and its
    # first batch, which spans both files, records the one late event of the second.
    (folder / "part-1.jsonl").write_text("\n".join(LATER) + "\n")
    invoke("run", spec_file)
    assert [event for event, _ in query_events(root, LATE_QUERY)][:1] == ["started"]
    rows = read_table(spark, table_path(root, "action_counts_late")).collect()
    assert [(r.action, r.ts.isoformat(), r.windows_dropped, r.batch_id) for r in rows] == [
        ("open", "2026-11-25T10:15:00", 1, 0)
    ]
    assert rows[0].watermark.isoformat() == "2026-11-25T12:20:00"
