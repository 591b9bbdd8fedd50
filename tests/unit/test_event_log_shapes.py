"""A line of the event log that is JSON but not an event of the expected shape (nested
past any parser's depth, a batch id that is no number, a time that is no time) is
skipped and counted like one that is not JSON: ``status`` and the dashboard's API answer
from the rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from streamsmith.cli import cli
from streamsmith.monitor.eventlog import EventLog, LogFollower, read_events
from streamsmith.monitor.status_cache import cached_statuses
from streamsmith.web.server import Dashboard

BAD_LINES = [
    "[" * 100_000,  # RecursionError in json.loads
    '{"event":"progress","batch_id":"abc"}',
    '{"event":"progress","app":"app","query":"app.f","batch_id":"abc"}',
    '{"event":"progress","app":"app","query":"app.f","batch_id":1,"quarantined":"x"}',
    '{"event":"progress","app":"app","query":"app.f","batch_id":1,"batch_time":"soon"}',
    '{"event":"progress","app":"app","query":"app.f","batch_id":1,"expectations":[1]}',
    '{"event":"progress","app":"app","query":"app.f","batch_id":1,'
    '"expectations":{"r":{"failed":"many"}}}',
    '{"event":"run_started","app":"app","queries":"app.f","graph":{"a":1}}',
    '{"event":"started","app":"app","query":["app.f"],"pid":"1"}',
    '{"event":7,"app":"app","query":"app.f"}',
    '{"event":"progress","app":"app","query":"app.f","batch_id":true}',
]


@pytest.fixture
def bad_log(tmp_path: Path) -> Path:
    log = EventLog(tmp_path, "app")
    log.write({"event": "started", "query": "app.f", "run_id": "r"})
    with log.path.open("a") as file:
        file.write("".join(line + "\n" for line in BAD_LINES))
    log.write({"event": "progress", "query": "app.f", "query_id": "q", "batch_id": 0,
               "batch_time": "2026-11-28T10:00:00.000Z", "quarantined": 2, "late": 1,
               "expectations": {"r": {"passed": 3, "failed": 1}}})  # fmt: skip
    return tmp_path


def test_lines_of_the_wrong_shape_are_skipped_and_counted(bad_log: Path) -> None:
    assert [e["event"] for e in read_events(bad_log, "app")] == ["started", "progress"]
    follower = LogFollower(bad_log, None)
    assert [e["event"] for e in follower.events()] == ["started", "progress"]
    assert follower.malformed == len(BAD_LINES)


def test_status_answers_past_lines_of_the_wrong_shape(bad_log: Path) -> None:
    (status,) = cached_statuses(bad_log, "app")
    assert (status.query, status.quarantined, status.late) == ("app.f", 2, 1)
    shown = CliRunner().invoke(cli, ["status", "--root", str(bad_log), "--format", "json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output.splitlines()[0])["quarantined"] == 2


def test_the_dashboard_api_answers_past_lines_of_the_wrong_shape(bad_log: Path) -> None:
    dashboard = Dashboard(bad_log).start()
    try:
        data = dashboard.data()
    finally:
        dashboard.stop()
    assert data["malformed_event_lines"] == len(BAD_LINES)
    json.dumps(data)
