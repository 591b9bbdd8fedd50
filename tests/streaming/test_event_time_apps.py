"""The event-time apps end to end: generated data with known fates, one batch per chunk.

Every generated line carries a label (on time, out of order, late, too late, duplicate,
corrupt) computed by replaying the watermark, so the tests can reconcile every count:
input = counted + quarantined + dropped as late (+ deduplicated).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from streamsmith.apps import get_app
from streamsmith.cli import cli
from streamsmith.config import Trigger, load_spec
from streamsmith.generate.actions import actions_data
from streamsmith.generate.activity import activity_data
from streamsmith.generate.events import EventData, Knobs, Rule
from streamsmith.generate.logs import entry_level_and_time, logs_data
from streamsmith.generate.signals import signals_data
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.lake import read_table, table_path
from streamsmith.runtime.plan import build_plan
from streamsmith.stateful.sessions import advance
from streamsmith.testing import ChunkRunner


@pytest.fixture
def runner_for(
    spark: SparkSession, tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    monkeypatch.setenv("STREAMSMITH_PG_DSN", pg_dsn)
    started: list[ChunkRunner] = []

    def start(app_name: str) -> ChunkRunner:
        app = get_app(app_name)
        spec = load_spec(app.default_spec, storage_root=str(tmp_path))
        runner = ChunkRunner(spark, build_plan(app, spec, Trigger("interval", 0.0)))
        started.append(runner)
        return runner

    yield start
    for runner in started:
        runner.stop()


def rows(dsn: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return [tuple(row) for row in conn.execute(query).fetchall()]


def expected_windows(data: EventData, key: str) -> dict[tuple[str, datetime], int]:
    counts: Counter[tuple[str, datetime]] = Counter()
    for event in data.counted():
        assert event.record is not None
        for start, _ in event.windows_counted:
            counts[(str(event.record[key]), start)] += 1
    return dict(counts)


def test_signals_reconcile_counted_late_and_quarantined(
    spark: SparkSession, runner_for: Any, pg_dsn: str, tmp_path: Path
) -> None:
    data = signals_data(
        devices=4, events=400, chunks=6, seed=3,
        knobs=Knobs(out_of_order=0.1, late=0.15, too_late=0.06, corrupt=0.03),
    )  # fmt: skip
    labels = data.label_counts
    assert labels["late"] and labels["too_late"] and labels["corrupt"]
    runner = runner_for("signals")
    for chunk in data.chunks:
        runner.send(chunk)

    windows = rows(pg_dsn, 'SELECT "deviceId", window_start, events FROM signal_windows')
    assert {(d, w): n for d, w, n in windows} == expected_windows(data, "deviceId")
    late = read_table(spark, table_path(tmp_path, "signal_windows_late"))
    dropped = late.groupBy().sum("windows_dropped").first()
    valid = sum(1 for item in data.delivered if item.record is not None)
    counted_pairs = sum(n for _, _, n in windows)
    # Every valid event sits in 2 windows: each pair is counted or recorded as dropped.
    assert counted_pairs + (dropped[0] or 0) == 2 * valid
    assert late.count() == labels["too_late"] + labels["partly_late"]
    quarantine = read_table(spark, table_path(tmp_path, "signal_windows_quarantine"))
    assert quarantine.count() == labels["corrupt"]
    # The running average has no watermark: every valid event counts, late or not.
    averages = rows(pg_dsn, "SELECT sum(events) FROM device_averages")
    assert averages == [(valid,)]
    # The memory table is in complete mode, where Spark keeps every window and a
    # watermark drops nothing: it counts the late events too.
    live = spark.sql("SELECT sum(events) FROM signal_windows_live").first()
    assert live is not None and live[0] == 2 * valid


def test_activity_dedup_reconciles_input_counted_late_and_duplicates(
    spark: SparkSession, runner_for: Any, pg_dsn: str, tmp_path: Path
) -> None:
    data = activity_data(
        users=9, events=500, chunks=5, seed=4,
        knobs=Knobs(duplicates=0.1, late=0.2, too_late=0.03, corrupt=0.02),
    )  # fmt: skip
    labels = data.label_counts
    assert labels["duplicate"] and labels["too_late"] and labels["late"]
    runner = runner_for("activity")
    for chunk in data.chunks:
        runner.send(chunk)

    counts = dict(rows(pg_dsn, 'SELECT "User", count FROM user_counts'))
    expected = Counter(str(item.record["User"]) for item in data.counted(dedup=True) if item.record)
    assert counts == dict(expected)
    memory = {r.User: r["count"] for r in spark.sql("SELECT * FROM deduplicated").collect()}
    assert memory == counts
    late = read_table(spark, table_path(tmp_path, "user_counts_late")).count()
    quarantined = read_table(spark, table_path(tmp_path, "user_counts_quarantine")).count()
    assert late == labels["too_late"]
    assert quarantined == labels["corrupt"]
    deduplicated = len(data.delivered) - sum(counts.values()) - late - quarantined
    assert deduplicated == labels["duplicate"]
    sessions = read_table(spark, table_path(tmp_path, "activity_sessions")).collect()
    assert sorted((r.User, r.activity, r.start, r.end, r.readings) for r in sessions) == (
        expected_sessions(data, gap_ms=30_000, delay_ms=5_000)
    )


def expected_sessions(data: EventData, gap_ms: int, delay_ms: int) -> list[Any]:
    """Replay the session rule over what the stream reads: chunk by chunk (one batch
    each), rows of a chunk in time order per user, late rows dropped; then close what
    the final watermark passed."""
    open_: dict[str, Any] = {}
    closed = []
    for number in range(data.chunk_count):
        chunk = [i for i in data.counted() if i.chunk == number and i.time is not None]
        for item in sorted(chunk, key=lambda i: (str(i.key), i.time)):
            assert item.record is not None and item.time is not None
            at_ms = round(item.time.timestamp() * 1000)
            user = str(item.record["User"])
            open_[user], ended = advance(open_.get(user), str(item.record["gt"]), at_ms, gap_ms)
            closed += [(user, ended)] if ended else []
    final = max(round(i.time.timestamp() * 1000) for i in data.counted() if i.time) - delay_ms
    closed += [(user, s) for user, s in open_.items() if s[2] + gap_ms <= final]

    def stamp(ms: int) -> datetime:
        return datetime.fromtimestamp(ms / 1000, UTC).replace(tzinfo=None)

    return sorted((u, s[0], stamp(s[1]), stamp(s[2]), s[3]) for u, s in closed)


@pytest.mark.deep  # make test: the actions counts' prefix integrity and lateness
def test_actions_never_count_closes_ahead_of_opens(runner_for: Any, pg_dsn: str) -> None:
    data = actions_data(
        phones=10, sessions=150, chunks=5, seed=5, knobs=Knobs(late=0.1, corrupt=0.02)
    )
    runner = runner_for("actions")
    for chunk in data.chunks:
        runner.send(chunk)
        totals = dict(rows(pg_dsn, "SELECT action, sum(count) FROM action_counts GROUP BY 1"))
        assert totals.get("close", 0) <= totals.get("open", 0)

    counts = rows(pg_dsn, "SELECT action, window_start, count FROM action_counts")
    assert {(a, w): n for a, w, n in counts} == expected_windows(data, "action")


def test_actions_lateness_comes_from_the_spec(
    spark: SparkSession, tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same events under an hour's and the default day's lateness: the hour drops
    exactly the events its late table records, the day counts them all."""
    monkeypatch.setenv("STREAMSMITH_PG_DSN", pg_dsn)
    hour = Rule(delay=timedelta(hours=1), window=timedelta(hours=1))
    data = actions_data(
        phones=6, sessions=120, chunks=5, seed=8, knobs=Knobs(late=0.1, too_late=0.1), rule=hour
    )
    assert data.label_counts["too_late"] >= 5
    app = get_app("actions")
    counts = {}
    for lateness in ("1 hour", "1 day"):
        table = f"counts_{lateness.split()[1]}"
        sets = [
            f"flows.action_counts.event_time.lateness={lateness}",
            f"flows.action_counts.sink.table={table}",
            "flows.action_counts_sliding.enabled=false",
        ]
        spec = load_spec(app.default_spec, sets=sets, storage_root=str(tmp_path / table))
        runner = ChunkRunner(spark, build_plan(app, spec, Trigger("interval", 0.0)))
        try:
            for chunk in data.chunks:
                runner.send(chunk)
        finally:
            runner.stop()
        found = rows(pg_dsn, f"SELECT action, window_start, count FROM {table}")
        counts[lateness] = Counter({(a, w): n for a, w, n in found})

    assert counts["1 hour"] == Counter(expected_windows(data, "action"))
    every_event = Counter(
        (str(item.record["action"]), item.time.replace(minute=0, second=0, microsecond=0))
        for item in data.delivered
        if item.record is not None and item.time is not None
    )
    assert counts["1 day"] == every_event
    late = read_table(spark, table_path(tmp_path / "counts_hour", "counts_hour_late")).collect()
    assert len(late) == data.label_counts["too_late"]
    late_windows = Counter(
        (r.action, r.time.replace(minute=0, second=0, microsecond=0, tzinfo=UTC)) for r in late
    )
    assert counts["1 day"] - counts["1 hour"] == late_windows
    late_day = table_path(tmp_path / "counts_day", "counts_day_late")
    assert not late_day.exists() or read_table(spark, late_day).count() == 0


@pytest.mark.deep  # make test: activity from files, and the Kafka source's own tests
def test_activity_from_kafka_parses_values_and_reconciles(
    spark: SparkSession,
    tmp_path: Path,
    pg_dsn: str,
    broker: EmbeddedBroker,
    topic: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STREAMSMITH_PG_DSN", pg_dsn)
    data = activity_data(
        users=5, events=200, chunks=3, seed=8,
        knobs=Knobs(duplicates=0.1, late=0.0, too_late=0.0, corrupt=0.03),
    )  # fmt: skip
    app = get_app("activity")
    kafka_source = [
        "sources.activity.format=kafka",
        "sources.activity.path=null",
        f"sources.activity.options.subscribe={topic}",
        "sources.activity.options.startingOffsets=earliest",
        f"kafka.bootstrap_servers={broker.bootstrap}",
        "flows.sessions.enabled=false",  # checked from files above; the parse is the point
    ]
    spec = load_spec(app.default_spec, sets=kafka_source, storage_root=str(tmp_path))
    with ChunkRunner(spark, build_plan(app, spec, Trigger("interval", 0.0))) as runner:
        for chunk in data.chunks:
            runner.send(chunk)

    quarantine = read_table(spark, table_path(tmp_path, "user_counts_quarantine"))
    counts = dict(rows(pg_dsn, 'SELECT "User", count FROM user_counts'))
    expected = Counter(str(item.record["User"]) for item in data.counted(dedup=True) if item.record)
    assert counts == dict(expected)
    assert quarantine.count() == data.label_counts["corrupt"]
    assert {row.source_file.split("/")[2] for row in quarantine.collect()} == {topic}


def test_log_curation_reconciles_and_answers_the_seeds_question(
    spark: SparkSession, runner_for: Any, tmp_path: Path
) -> None:
    data = logs_data(
        hosts=4, entries=400, chunks=4, seed=6,
        knobs=Knobs(duplicates=0.1, late=0.1, too_late=0.03, corrupt=0.04),
    )  # fmt: skip
    labels = data.label_counts
    assert labels["duplicate"] and labels["too_late"] and labels["corrupt"] and labels["late"]
    runner = runner_for("logs")
    for chunk in data.chunks:
        runner.send(chunk)

    table = read_table(spark, table_path(tmp_path, "service_logs")).count()
    late = read_table(spark, table_path(tmp_path, "service_logs_late")).count()
    quarantined = read_table(spark, table_path(tmp_path, "service_logs_quarantine")).count()
    kept = [item.record for item in data.counted(dedup=True) if item.record]
    assert (table, late, quarantined) == (len(kept), labels["too_late"], labels["corrupt"])
    assert len(data.delivered) - table - late - quarantined == labels["duplicate"]

    start, end = datetime(2026, 11, 20, 10, tzinfo=UTC), datetime(2026, 11, 20, 10, 30, tzinfo=UTC)
    expected = 0
    for record in kept:
        level, logged = entry_level_and_time(str(record["message"]))
        expected += record["service"] == "billing" and level == "ERROR" and start <= logged < end
    question = (
        "SELECT count(*) AS errors FROM service_logs WHERE service = 'billing' "
        "AND level = 'ERROR' AND log_time >= '2026-11-20 10:00' AND log_time < '2026-11-20 10:30'"
    )
    command = ["query", "--app", "logs", "--root", str(tmp_path), "--format", "json", question]
    answer = CliRunner().invoke(cli, command)
    assert answer.exit_code == 0, answer.output
    assert json.loads(answer.output) == {"errors": expected} and expected > 0
