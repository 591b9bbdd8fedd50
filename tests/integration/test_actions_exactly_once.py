"""Phone actions into PostgreSQL exactly once: under SIGKILL and a database crash.

The actions app runs in a subprocess, one input file per micro-batch. Faults are injected
at the worst moments (see ``actions_child.py``); after a restart on the same checkpoint
the PostgreSQL tables must equal the counts of the input, every micro-batch must be in
the ledger exactly once, and closes must never outnumber opens.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from crashing import spawn, wait_until
from typer.testing import CliRunner

from inprocess import invoke
from receivers import notification_receivers
from streamsmith.cli import cli
from streamsmith.io.postgres.server import PostgresServer, start_postgres
from streamsmith.monitor.eventlog import read_events

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("actions_child.py")
START = datetime(2026, 11, 20, 9, tzinfo=UTC)
HOUR = timedelta(hours=1)


def write_actions(inbox: Path, files: int, phones: int, seed: int) -> Counter[tuple[str, datetime]]:
    """Open/close sessions of ``phones`` phones over ``files`` files in time order, plus one
    malformed line per file; returns the expected count per (action, hour)."""
    rng = random.Random(seed)
    inbox.mkdir(parents=True, exist_ok=True)
    expected: Counter[tuple[str, datetime]] = Counter()
    for number in range(files):
        lines = []
        for phone in range(phones):
            opened = START + timedelta(minutes=20 * number + rng.randint(0, 9))
            closed = opened + timedelta(minutes=rng.randint(1, 10))
            for action, moment in (("open", opened), ("close", closed)):
                stamp = moment.isoformat().replace("+00:00", "Z")
                lines.append(json.dumps({"phone_id": f"p{phone}", "time": stamp, "action": action}))
                expected[(action, moment.replace(minute=0, second=0))] += 1
        lines.append('{"phone_id": "p0", "time": "soon", "action": "open"}')
        written = inbox / f"actions-{number:03d}.json"
        written.write_text("\n".join(lines) + "\n")
        # Spark's file source takes files in modification-time order: make it the
        # delivery order, or a later file could move the watermark past an earlier one.
        os.utime(written, (1_700_000_000 + number, 1_700_000_000 + number))
    return expected


def table(dsn: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return [tuple(row) for row in conn.execute(query).fetchall()]


def run_child(
    root: Path, dsn: str, fault: str, batch: int, home: Path | None = None, sets: Sequence[str] = ()
) -> subprocess.Popen[str]:
    command = [sys.executable, str(CHILD), str(root), fault, str(batch), str(home or ""), *sets]
    return spawn(command, env={"STREAMSMITH_PG_DSN": dsn})


def assert_exactly_once(dsn: str, expected: Counter[tuple[str, datetime]], files: int) -> None:
    counts = table(dsn, "SELECT action, window_start, count FROM action_counts")
    assert {(a, w): n for a, w, n in counts} == dict(expected)
    ledger = table(
        dsn,
        "SELECT sink, array_agg(batch_id ORDER BY batch_id) FROM streamsmith_ledger GROUP BY 1",
    )
    assert sorted(sink for sink, _ in ledger) == [
        "actions.action_counts",
        "actions.action_counts_sliding",
    ]
    for sink, batch_ids in ledger:
        # Every micro-batch once, none skipped; Spark adds no-data batches when the
        # watermark moves (to evict state), so there may be more batches than files.
        assert batch_ids == list(range(len(batch_ids))), sink
        assert len(batch_ids) >= files, sink
    sliding = table(dsn, "SELECT action, sum(count) FROM action_counts_sliding GROUP BY 1")
    per_action = Counter[str]()
    for (action, _), n in expected.items():
        per_action[action] += n
    assert dict(sliding) == {a: 12 * n for a, n in per_action.items()}  # 12 windows per event


def test_sigkill_after_the_database_commit_replays_as_a_no_op(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = write_actions(tmp_path / "input/actions", files=4, phones=8, seed=1)

    crashed = run_child(tmp_path, pg_dsn, "kill-after-commit", batch=2)
    _, stderr = crashed.communicate(timeout=600)
    assert crashed.returncode == -9, stderr[-3000:]
    committed = table(
        pg_dsn, "SELECT max(batch_id) FROM streamsmith_ledger WHERE sink = 'actions.action_counts'"
    )
    assert committed == [(2,)]  # the database has batch 2; Spark's commit log does not

    # The restart, in this process's session: the checkpoint, not the process, is the point.
    monkeypatch.setenv("STREAMSMITH_PG_DSN", pg_dsn)
    one_file = ("--set", "sources.actions.max_files_per_trigger=1")
    restarted = invoke(
        "run", "actions", "--root", str(tmp_path), "--trigger", "available-now", *one_file
    )
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert_exactly_once(pg_dsn, expected, files=4)
    quarantine = tmp_path / "tables/action_counts_quarantine"
    assert quarantine.is_dir()


@pytest.mark.deep  # make test: the supervisor's retries in-process (test_monitoring.py)
def test_database_crash_mid_batch_is_survived_by_a_supervised_restart(
    tmp_path: Path, postgres: PostgresServer, pg_dsn: str
) -> None:
    expected = write_actions(tmp_path / "input/actions", files=5, phones=6, seed=2)
    supervision = ["supervisor.max_retries=6", "supervisor.backoff=1s"]

    with notification_receivers() as received:
        child = run_child(
            tmp_path, pg_dsn, "stop-db-mid-batch", batch=1, home=postgres.home,
            sets=[*supervision, *received.spec_sets()],
        )  # fmt: skip
        try:
            failed = wait_until(child, lambda: "failure" in _events(tmp_path), deadline_s=300)
            running = _status(tmp_path)  # while the run goes on
            start_postgres(postgres.home)  # the database comes back; the supervisor retries
            _, stderr = child.communicate(timeout=600)
        finally:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
        assert failed, stderr[-3000:]
        assert child.returncode == 0, stderr[-3000:]
        assert running[FAULTY_QUERY]["state"] in ("restarting", "active")
        assert running[FAULTY_QUERY]["last_error"]
        assert running["actions.action_counts.quarantine"]["state"] == "active"
        assert _status(tmp_path)[FAULTY_QUERY]["state"] == "stopped"  # after the run
        assert received.wait_for(lambda r: "restart" in r.events())

    assert_exactly_once(pg_dsn, expected, files=5)
    events = [e for e in read_events(tmp_path, "actions") if e.get("query") == FAULTY_QUERY]
    failures = [e for e in events if e["event"] == "failure"]
    assert failures and failures[0]["query"] == "actions.action_counts"
    assert any(e["event"] == "restart" for e in events)
    assert not any(e["event"] == "gave_up" for e in events)
    # Both PostgreSQL sinks may fail while the database is down; each is restarted.
    assert received.events()[0] == "failure" and "restart" in received.events()
    subjects = [mail["Subject"] for mail in received.mails]
    assert subjects[0].startswith("[streamsmith] actions: failure in actions.action_counts")
    assert f"[streamsmith] actions: failure in {FAULTY_QUERY}" in subjects
    assert pg_dsn not in json.dumps(received.posts)


FAULTY_QUERY = "actions.action_counts"


def _status(root: Path) -> dict[str, dict[str, Any]]:
    """``streamsmith status`` as a user runs it, by query."""
    command = ["status", "actions", "--root", str(root), "--format", "json"]
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 0, result.output
    return {row["query"]: row for row in map(json.loads, result.output.splitlines())}


def _events(root: Path) -> list[str]:
    return [e["event"] for e in read_events(root, "actions") if e.get("query") == FAULTY_QUERY]
