"""The monitor's pure parts: progress records, lag, SLO alerts, status, the event log."""

from __future__ import annotations

import json
import logging
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import streamsmith
from streamsmith.config import AlertRules, load_spec
from streamsmith.io.read_counts import FILES_READ, LINES_READ, READ_COUNT
from streamsmith.monitor.alerts import SloWatch
from streamsmith.monitor.eventlog import EventLog, prune_event_logs, read_events
from streamsmith.monitor.lag import FileSourceProbe, processed_files
from streamsmith.monitor.metrics import QueryMetrics, health_body
from streamsmith.monitor.notify import notification_text
from streamsmith.monitor.progress import FLOW_METRIC, output_rows, progress_record, records_read
from streamsmith.monitor.recorder import spec_secrets
from streamsmith.monitor.status import query_statuses
from streamsmith.monitor.status_view import batch_age, compact_lines, flow_of, rate

KAFKA_PROGRESS: dict[str, Any] = {
    "id": "q-1",
    "runId": "r-1",
    "name": "signals.signal_windows",
    "timestamp": "2026-11-23T10:00:30.000Z",
    "batchId": 7,
    "numInputRows": 120,
    "inputRowsPerSecond": 40.0,
    "processedRowsPerSecond": "NaN",
    "durationMs": {"triggerExecution": 2500, "addBatch": 2000},
    "eventTime": {"watermark": "2026-11-23T09:50:00.000Z", "max": "2026-11-23T10:00:00.000Z"},
    "stateOperators": [
        {"numRowsTotal": 30, "memoryUsedBytes": 1000, "numRowsDroppedByWatermark": 2},
        {"numRowsTotal": 5, "memoryUsedBytes": 24, "numRowsDroppedByWatermark": 1},
    ],
    "sources": [
        {
            "description": "streamsmith_kafka[subscribe=signals]",
            "startOffset": {"signals": {"0": 10, "1": 20}},
            "endOffset": {"signals": {"0": 50, "1": 90}},
            "latestOffset": {"signals": {"0": 80, "1": 90, "2": 7}},
        }
    ],
    "observedMetrics": {"quarantine": {"rows": 4}},
}


def test_progress_record_flattens_what_operators_look_at() -> None:
    record = progress_record(KAFKA_PROGRESS)
    assert record["query"] == "signals.signal_windows" and record["batch_id"] == 7
    assert record["input_rows"] == 120 and record["input_rate"] == 40.0
    assert record["process_rate"] is None  # Spark's NaN: no rate for this batch
    assert record["batch_ms"] == 2500
    assert record["watermark_delay_s"] == 630.0  # 10:00:30 - 09:50:00
    assert record["state_rows"] == 35 and record["state_memory_bytes"] == 1024
    assert record["dropped_by_watermark"] == 3
    assert record["quarantined"] == 4 and record["late"] is None
    # latest - processed per partition; a new partition counts from 0
    assert record["lag"] == 30 + 0 + 7
    source = json.loads(record["sources"])[0]
    assert source["lag_partitions"] == {"signals-0": 30, "signals-1": 0, "signals-2": 7}
    assert json.loads(record["progress"]) == KAFKA_PROGRESS


def test_records_read_put_the_lines_of_files_read_whole_in_the_files_place() -> None:
    # Two files of lines read whole (Spark's 2 input rows, 9 lines) beside 120 Kafka
    # records, in a query that does not count its flow's records itself (a second sink).
    observed = {
        f"{FILES_READ}3": {READ_COUNT: 2},
        f"{LINES_READ}3": {READ_COUNT: 9},
        "quarantine": {"rows": 4},
    }
    progress = {
        **KAFKA_PROGRESS,
        "numInputRows": 122,
        "inputRowsPerSecond": 61.0,
        "processedRowsPerSecond": 244.0,
        "observedMetrics": observed,
    }
    record = progress_record(progress)
    assert record["input_rows"] == records_read(progress) == 129
    # Spark's rates are rows per second: in records, as much faster.
    assert record["input_rate"] == 61.0 * 129 / 122
    assert record["process_rate"] == 244.0 * 129 / 122
    # The flow's own count, where its main query makes one, comes first.
    counted = {**observed, FLOW_METRIC: {"rows": 0, "read": 131}}
    assert records_read({**progress, "observedMetrics": counted}) == 131


def test_the_log_keeps_how_many_rejects_a_report_carried_not_the_rows() -> None:
    carried = [{"_reject_reason": "malformed JSON line", "_raw": "{" * 1_000}] * 3
    metric = {"rows": 3, "oldest_us": None, "rejects": carried}
    progress = {**KAFKA_PROGRESS, "observedMetrics": {FLOW_METRIC: metric}}
    logged = json.loads(progress_record(progress)["progress"])
    assert logged["observedMetrics"][FLOW_METRIC] == {"rows": 3, "oldest_us": None, "rejects": 3}
    assert progress["observedMetrics"][FLOW_METRIC]["rejects"] == carried  # not changed
    none = {**KAFKA_PROGRESS, "observedMetrics": {FLOW_METRIC: {**metric, "rejects": None}}}
    assert json.loads(progress_record(none)["progress"]) == none


def test_rows_written_come_from_the_observed_count_else_from_the_sink() -> None:
    # A query writing to Spark's Kafka sink observes no count: Spark's sink reports it.
    spark_sink = {**KAFKA_PROGRESS, "sink": {"description": "KafkaTable", "numOutputRows": 9}}
    assert output_rows(spark_sink) == progress_record(spark_sink)["output_rows"] == 9
    observed = {**spark_sink, "observedMetrics": {"written": {"rows": 8}}}
    assert output_rows(observed) == 8  # the query's own count, where it makes one
    foreach = {**KAFKA_PROGRESS, "sink": {"description": "ForeachBatchSink", "numOutputRows": -1}}
    assert output_rows(foreach) is None and output_rows(KAFKA_PROGRESS) is None


def test_no_watermark_yet_means_no_delay() -> None:
    progress = {**KAFKA_PROGRESS, "eventTime": {"watermark": "1970-01-01T00:00:00.000Z"}}
    progress["sources"] = [{"description": "FileStreamSource", "endOffset": {"logOffset": 3}}]
    record = progress_record(progress)
    assert record["watermark"] is None and record["watermark_delay_s"] is None
    assert record["lag"] is None  # the monitor measures file backlogs itself


def test_file_backlog_counts_unread_files_after_compaction(tmp_path: Path) -> None:
    inbox, log = tmp_path / "in", tmp_path / "cp/sources/0"
    inbox.mkdir()
    log.mkdir(parents=True)
    files = []
    for number in range(5):
        path = inbox / f"f{number}.json"
        path.write_text("x" * (number + 1))
        files.append(path)
    (inbox / ".f9.json.tmp").write_text("hidden: Spark skips it")
    (inbox / "_spark_metadata").mkdir()  # a lake table read as a stream: its commit log
    (inbox / "_spark_metadata" / "0").write_text("v1")

    def entry(path: Path, batch: int) -> str:
        return json.dumps({"path": f"file://{path}", "timestamp": 1, "batchId": batch})

    (log / "0").write_text("v1\n" + entry(files[0], 0))
    (log / "1.compact").write_text("v1\n" + entry(files[0], 0) + "\n" + entry(files[1], 1))
    (log / "2").write_text("v1\n" + entry(files[2], 2))
    assert processed_files(log) == {str(files[0]), str(files[1]), str(files[2])}
    backlog = FileSourceProbe(inbox, tmp_path / "cp").backlog()
    assert (backlog.files, backlog.bytes) == (2, 4 + 5)
    assert FileSourceProbe(inbox, tmp_path / "cp", glob="f4*").backlog().files == 1


def _progress(query: str, batch: int, **values: Any) -> dict[str, Any]:
    base = {"event": "progress", "query": query, "batch_id": batch, "input_rows": 100}
    return {**base, **values}


def test_slo_alerts_fire_once_per_episode() -> None:
    rules = AlertRules(falling_behind_batches=2, max_lag=50, max_quarantine_ratio=0.1)
    watch = SloWatch(rules, {"q": 5.0})
    behind = {"input_rate": 200.0, "process_rate": 100.0}
    assert watch.observe(_progress("q", 0, **behind)) == []  # one batch behind: not yet
    fired = watch.observe(_progress("q", 1, **behind, lag=80, batch_ms=6000))
    assert sorted(alert.rule for alert in fired) == ["falling_behind", "lag", "slow_batch"]
    assert watch.observe(_progress("q", 2, **behind, lag=90, batch_ms=7000)) == []  # still
    assert watch.observe(_progress("q", 3, input_rate=50.0, process_rate=100.0)) == []
    again = watch.observe(_progress("q", 4, lag=60, quarantined=20))
    assert sorted(alert.rule for alert in again) == ["lag", "quarantine_rate"]
    assert "20 of 100" in next(a.message for a in again if a.rule == "quarantine_rate")


def test_watermark_delay_rule() -> None:
    watch = SloWatch(AlertRules(max_watermark_delay="15m"), {})
    assert watch.observe(_progress("q", 0, watermark_delay_s=600.0)) == []
    (alert,) = watch.observe(_progress("q", 1, watermark_delay_s=1200.0))
    assert alert.rule == "watermark_delay" and "1200 s" in alert.message


def test_status_folds_restarts_failures_and_dead_processes() -> None:
    events = [
        {"event": "started", "app": "a", "query": "q1", "pid": 1},
        _progress("q1", 0, app="a", query_id="x", quarantined=2, late=1),
        {"event": "failure", "app": "a", "query": "q1", "pid": 1, "message": "db down"},
        {"event": "terminated", "app": "a", "query": "q1", "message": "db down"},  # late
        {"event": "restart", "app": "a", "query": "q1", "pid": 1},
        _progress("q1", 0, app="a", query_id="x", quarantined=2, late=1),  # replayed batch
        _progress("q1", 1, app="a", query_id="x", quarantined=3, lag=4, batch_time="T"),
        {"event": "started", "app": "a", "query": "q2", "pid": 2},
        {"event": "terminated", "app": "a", "query": "q2", "message": "boom"},
        {"event": "started", "app": "b", "query": "q3", "pid": 3},
    ]
    assert query_statuses(events[:4], alive=lambda pid: True)[0].state == "restarting"
    statuses = {s.query: s for s in query_statuses(events, alive=lambda pid: pid == 1)}
    q1 = statuses["q1"]
    assert (q1.state, q1.batches, q1.quarantined, q1.late) == ("active", 2, 5, 1)
    assert (q1.restarts, q1.last_error, q1.lag, q1.last_batch_time) == (1, "db down", 4, "T")
    assert (statuses["q2"].state, statuses["q2"].last_error) == ("failed", "boom")
    assert statuses["q3"].state == "stopped (process gone)"


def test_compact_status_groups_queries_by_flow_and_never_cuts_a_name() -> None:
    long_flow = "hourly_sightings_by_zip_code_with_device_locations_joined"
    events = [
        {"event": "started", "app": "nest", "query": f"nest.{long_flow}", "pid": 1},
        _progress(f"nest.{long_flow}", 4, app="nest", query_id="a", input_rate=1234.5,
                  process_rate=7.25, lag=12, quarantined=3, late=2,
                  batch_time="2026-11-25T10:00:00.000Z",
                  expectations={"has_zip": {"passed": 97, "failed": 3}}),
        {"event": "started", "app": "nest", "query": f"nest.{long_flow}.quarantine", "pid": 1},
        {"event": "started", "app": "nest", "query": "nest.archive", "pid": 1},
        {"event": "gave_up", "app": "nest", "query": "nest.archive", "pid": 1,
         "message": "PostgreSQL refused the connection " + "again " * 20},
        {"event": "started", "app": "nest", "query": "camera_memory", "pid": 1},
    ]  # fmt: skip
    statuses = query_statuses(events, alive=lambda pid: True)
    now = datetime(2026, 11, 25, 10, 3, 5, tzinfo=UTC)
    for width in (80, 200):
        lines = compact_lines(statuses, width, now)
        text = "\n".join(lines)
        assert all(len(line) <= width for line in lines), text
        for status in statuses:
            assert status.query in text and status.state in text
        assert lines[0] == "nest: 3 flows, 4 queries"
        assert lines[1] == f"  flow {long_flow}" and "  flow camera_memory" in lines
        assert "3m ago" in text and "in 1234/s" in text and "processed 7.2/s" in text
        assert "lag 12" in text and "quarantined 3" in text and "late 2" in text
        assert "has_zip failed 3/100" in text
        assert "error: PostgreSQL refused the connection" in text
    narrow = compact_lines(statuses, 40, now)
    assert all(len(line) <= 40 for line in narrow)
    assert f"nest.{long_flow}.quarantine" in "".join(line.strip() for line in narrow)
    wide = compact_lines(statuses, 200, now)
    # one line per query, cells aligned; the main query before its quarantine query
    assert wide[2].split()[:6] == [f"nest.{long_flow}", "active", "3m", "ago", "in", "1234/s"]
    assert wide[3].split()[:5] == [f"nest.{long_flow}.quarantine", "active", "no", "batch", "yet"]
    assert wide[2].index("active") == wide[3].index("active")
    assert wide[2].index("quarantined 3") == wide[3].index("quarantined 0")


def test_status_cells_read_as_a_person_says_them() -> None:
    now = datetime(2026, 11, 25, 10, 0, 0, tzinfo=UTC)
    assert batch_age("2026-11-25T09:59:48.000Z", now) == "12s ago"
    assert batch_age("2026-11-25T07:00:00.000Z", now) == "3h ago"
    assert batch_age("2026-11-23T09:00:00.000Z", now) == "2d ago"
    assert batch_age(None, now) == "no batch yet"
    assert [rate(v) for v in (None, 0.25, 12.4, 25_300.0)] == ["-", "0.2/s", "12/s", "25k/s"]
    assert flow_of("a", "a.f") == ("f", "main")
    assert flow_of("a", "a.f.quarantine") == ("f", "quarantine")
    assert flow_of("a", "a.f.late") == ("f", "late")
    assert flow_of("a", "memory_table") == ("memory_table", "main")


def test_event_log_redacts_secrets_and_skips_a_torn_last_line(tmp_path: Path) -> None:
    log = EventLog(tmp_path, "app", secrets=["postgresql://u:s3cret-pw@h/db", "s3cret-pw"])
    log.write({"event": "failure", "query": "q", "message": "auth s3cret-pw failed"})
    log.write({"event": "x", "message": 'dsn "postgresql://u:s3cret-pw@h/db"'})
    with log.path.open("a") as file:
        file.write('{"event": "progress", "query')  # killed mid-write
    events = read_events(tmp_path, "app")
    assert [e["message"] for e in events] == ["auth *** failed", 'dsn "***"']
    assert "s3cret" not in log.path.read_text()
    assert events[0]["app"] == "app" and events[0]["pid"] > 0


def test_a_corrupt_line_in_the_event_log_is_skipped_counted_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamsmith.monitor.eventlog import LogFollower
    from streamsmith.monitor.status_cache import cached_statuses

    # A library's logging.config call (disable_existing_loggers) may have turned it off.
    monkeypatch.setattr(logging.getLogger("streamsmith.monitor.eventlog"), "disabled", False)
    caplog.set_level(logging.WARNING, logger="streamsmith")
    log = EventLog(tmp_path, "app")
    log.write({"event": "started", "query": "app.f", "run_id": "r"})
    with log.path.open("ab") as file:
        file.write(b'{"event": "progress", "qu\x00\xff\n[1, 2]\n\n')  # a disk error, not JSON
    log.write({"event": "failure", "query": "app.f", "message": "boom"})
    expected = ["started", "failure"]
    assert [e["event"] for e in read_events(tmp_path, "app")] == expected
    follower = LogFollower(tmp_path, "app")
    assert [e["event"] for e in follower.events()] == expected and follower.malformed == 2
    assert [s.query for s in cached_statuses(tmp_path, "app")] == ["app.f"]  # status answers
    warned = [r.getMessage() for r in caplog.records if "not a JSON object" in r.getMessage()]
    assert warned and all(str(log.path) in message for message in warned)


def test_spec_secrets_cover_dsn_webhook_and_kafka_passwords() -> None:
    spec = load_spec(
        {"app": "x", "sources": {"s": {"format": "text", "path": "in"}},
         "flows": {"f": {"source": "s", "sink": {"table": "t"}}}},
        sets=["postgres.dsn=host=h password=pw1", "notify.webhook=http://h/hook?token=tok2",
              "kafka.options.sasl.password=pw3"],
    )  # fmt: skip
    assert spec_secrets(spec) == ["host=h password=pw1", "pw1", "http://h/hook?token=tok2", "pw3"]


def test_metrics_and_health() -> None:
    metrics = QueryMetrics("app")
    metrics.update({"event": "started", "query": "q"})
    metrics.update(_progress("q", 3, input_rate=5.0, lag=7, quarantined=2))
    metrics.update(_progress("q", 4, quarantined=3))
    text = metrics.exposition().decode()
    assert 'streamsmith_source_lag{app="app",query="q"} 7.0' in text
    assert 'streamsmith_quarantined_rows_total{app="app",query="q"} 5.0' in text
    assert 'streamsmith_query_up{app="app",query="q"} 1.0' in text
    assert health_body({"q": "active", "r": "finished"})[0] == 200
    status, body = health_body({"q": "active", "r": "restarting"})
    assert status == 503 and body["queries"]["r"] == "restarting"


@pytest.mark.parametrize("event", ["failure", "alert"])
def test_notification_text_names_app_query_and_reason(event: str) -> None:
    subject, body = notification_text(
        {"event": event, "app": "a", "query": "q", "rule": "lag" if event == "alert" else None,
         "message": "why"}
    )  # fmt: skip
    assert subject == f"[streamsmith] a: {'lag' if event == 'alert' else event} in q"
    assert "message: why" in body


def test_old_event_logs_are_pruned(tmp_path: Path) -> None:
    old, other = EventLog(tmp_path, "app"), EventLog(tmp_path, "other")
    old.write({"event": "x"})
    other.write({"event": "x"})
    os.utime(old.path, (1_000_000, 1_000_000))
    os.utime(other.path, (1_000_000, 1_000_000))
    assert prune_event_logs(tmp_path, "app", older_than_s=86400) == [old.path]
    assert other.path.exists()  # another app's log is its own run's business


def test_status_carries_its_fold_on_and_equals_a_whole_read(tmp_path: Path) -> None:
    from streamsmith.monitor.status_cache import CACHE_DIR, cached_statuses

    def whole() -> list[dict[str, Any]]:
        return [s.as_dict() for s in query_statuses(read_events(tmp_path), alive=alive)]

    def cached() -> list[dict[str, Any]]:
        return [s.as_dict() for s in cached_statuses(tmp_path, alive=alive)]

    def alive(pid: int) -> bool:
        return pid == os.getpid()

    first = EventLog(tmp_path, "a")
    first.write({"event": "started", "query": "q1"})
    first.write(_progress("q1", 0, query_id="x", quarantined=2, late=1))
    first.write({"event": "failure", "query": "q1", "message": "db down"})
    assert cached() == whole() and (tmp_path / CACHE_DIR / "_all.json").is_file()
    first.write({"event": "restart", "query": "q1"})
    first.write(_progress("q1", 0, query_id="x", quarantined=3, late=1))  # replayed: newest
    first.write(
        _progress(
            "q1", 1, query_id="x", quarantined=1, expectations={"e": {"passed": 4, "failed": 1}}
        )
    )
    with first.path.open("a") as file:
        file.write('{"event": "progress", "query')  # being written
    assert cached() == whole()
    (q1,) = cached_statuses(tmp_path, alive=alive)
    assert (q1.batches, q1.quarantined, q1.restarts, q1.expectations) == (
        2, 4, 1, {"e": {"passed": 4, "failed": 1}})  # fmt: skip
    with first.path.open("a") as file:  # the line ends; a second process starts
        file.write('": "q1", "app": "a", "event": "restart"}\n')
    second = EventLog(tmp_path, "a")
    second.path = second.path.with_name("a-99991231T000000-2.jsonl")  # sorts after: merged
    second.write({"event": "started", "query": "q2"})
    assert cached() == whole() and [s["query"] for s in cached()] == ["q1", "q2"]
    second.path.unlink()  # pruned: the fold starts again
    assert cached() == whole() and [s["query"] for s in cached()] == ["q1"]


def test_the_dashboard_folds_on_what_the_log_gained(tmp_path: Path) -> None:
    from streamsmith.web.data import MAX_POINTS
    from streamsmith.web.server import Dashboard

    log = EventLog(tmp_path, "a")
    log.write({"event": "started", "query": "q1"})
    for batch in range(MAX_POINTS + 5):
        log.write(_progress("q1", batch, query_id="x", quarantined=1))
    live = Dashboard(tmp_path)
    try:
        first = live.data()
        log.write({"event": "failure", "query": "q1", "message": "db down"})
        log.write(_progress("q1", MAX_POINTS + 4, query_id="x", quarantined=2))  # replayed
        again = live.data()
        fresh = Dashboard(tmp_path)
        try:
            assert again == fresh.data()  # folding on equals folding anew
        finally:
            fresh.server.server_close()
    finally:
        live.server.server_close()
    assert first["queries"][0]["quarantined"] == MAX_POINTS + 5
    (points,) = again["series"].values()
    assert len(points) == MAX_POINTS and points[-1]["quarantined"] == 2
    assert [i["message"] for i in again["incidents"]] == ["db down"]
    assert again["queries"][0]["quarantined"] == MAX_POINTS + 6


def test_a_run_keeps_the_status_fold_so_a_first_look_reads_little(tmp_path: Path) -> None:
    from streamsmith.monitor.recorder import Monitor
    from streamsmith.monitor.status_cache import CACHE_DIR

    spec = load_spec({"app": "a", "sources": {"s": {"format": "text", "path": "in"}},
                      "flows": {"f": {"source": "s", "sink": {"table": "t"}}}})  # fmt: skip
    monitor = Monitor(spec, tmp_path, {"q1": 0.0})
    monitor.record({"event": "started", "query": "q1"})
    assert not (tmp_path / CACHE_DIR).exists()  # not every event: once a minute
    monitor._status_kept_at -= 120
    monitor.record(_progress("q1", 0, query_id="x", quarantined=3))
    assert monitor._status_keeper is not None
    monitor._status_keeper.join(10)
    kept = json.loads((tmp_path / CACHE_DIR / "a.json").read_text())
    (entry,) = kept["entries"].values()
    assert (entry["query"], entry["batches"], entry["quarantined"]) == ("q1", 1, 3)
    monitor.notifier.close()


def test_a_webhook_url_without_a_scheme_is_refused_by_the_spec_and_survived_by_the_notifier(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from pydantic import SecretStr

    from streamsmith.config import NotifySpec
    from streamsmith.errors import UserError
    from streamsmith.monitor.notify import Notifier

    spec = {"app": "x", "sources": {"s": {"format": "text", "path": "in"}},
            "flows": {"f": {"source": "s", "sink": {"table": "t"}}}}  # fmt: skip
    with pytest.raises(UserError, match="url must be an http:// or https:// URL") as refused:
        load_spec(spec, sets=["notify.webhook=hooks.example/x?token=s3cret"])
    assert "s3cret" not in str(refused.value)
    # Past the spec's check (built without it): the thread records each failure, goes on.
    unchecked = NotifySpec.model_construct(webhook=SecretStr("hooks.example/x?token=s3cret"))
    failures: list[tuple[str, str, object]] = []
    notifier = Notifier(unchecked, lambda *failure: failures.append(failure))
    for n in range(2):
        notifier.send({"event": "failure", "app": "x", "query": "x.f", "message": str(n)})
    notifier.close(wait_seconds=10)
    assert [(channel, error.split(":")[0]) for channel, error, _ in failures] == [
        ("webhook", "ValueError"),
        ("webhook", "ValueError"),
    ]
    assert "s3cret" not in caplog.text


def test_a_long_run_starts_a_new_event_log_past_its_size_and_prunes_old_ones(
    tmp_path: Path,
) -> None:
    from streamsmith.monitor.status_cache import cached_statuses

    ancient = EventLog(tmp_path, "app")
    ancient.path = ancient.path.with_name("app-20000101T000000-1.jsonl")
    ancient.write({"event": "started", "query": "gone"})
    os.utime(ancient.path, (1_000_000, 1_000_000))
    log = EventLog(tmp_path, "app", max_bytes=300, retention_s=86400)
    first = log.path
    log.write(_progress("app.q", 0, query_id="x"))
    log.write(_progress("app.q", 1, query_id="x"))  # now past 300 bytes
    time.sleep(1.05)  # a file is named by its second
    log.write(_progress("app.q", 2, query_id="x"))  # so this one starts a new file
    assert log.path != first and first.is_file() and log.path.name > first.name
    assert not ancient.path.exists()  # pruned when the new file started
    (status,) = cached_statuses(tmp_path, "app")  # readers merge both files
    assert (status.query, status.batches) == ("app.q", 3)


def test_the_dashboard_says_how_far_behind_a_watermark_is_and_charts_main_queries_first() -> None:
    from streamsmith.web.data import DashboardFold, behind

    assert [behind(s) for s in (None, 0.5, 42.0, 600.0, 7200.0, 3 * 86400.0)] == [
        None, "0.5 s behind", "42 s behind", "10 min behind", "2.0 hours behind",
        "3.0 days behind",
    ]  # fmt: skip
    assert behind(816453700.001) == "25.9 years behind"  # a 2001 watermark, seen in 2026
    fold = DashboardFold()
    for query in ("a.f.late", "a.f.quarantine", "a.f", "a.g"):
        fold.add({"event": "progress", "app": "a", "query": query, "batch_id": 0,
                  "query_id": query, "watermark_delay_s": 90.0})  # fmt: skip
    data = fold.data()
    assert list(data["series"]) == ["a.f", "a.g", "a.f.quarantine", "a.f.late"]
    assert {q["query"]: q["watermark_behind"] for q in data["queries"]}["a.f"] == ("1.5 min behind")


def test_a_cdc_flows_line_says_its_rows_are_change_events() -> None:
    from streamsmith.runtime.supervisor import QueryOutcome

    applied = QueryOutcome("census.countries", 2, 9, output_rows=8, changes=True)
    assert applied.summary() == (
        "census.countries: 2 batches, 9 records read, 8 rows written (change events, "
        "applied by key)"
    )
    late = QueryOutcome("census.countries.late", 2, 9, role="late", output_rows=1)
    assert late.summary() == "census.countries.late: 2 batches, 1 late events recorded"


def test_a_slow_batch_is_said_once_naming_the_stages_that_took_the_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Spark's own "Current batch is falling behind" WARN (every slow batch, no cause) is
    muted; the run says it once per query, with the stages of the batch's durationMs."""
    import re

    from streamsmith.monitor.recorder import Monitor

    properties = (Path(streamsmith.__file__).parent / "log4j2.properties").read_text()
    regexes = re.findall(r"^(?:appender|logger)\.\w+\.filter\.\w+\.regex = (.*)$", properties, re.M)
    spark_says = (
        "Current batch is falling behind. The trigger interval is 10000 milliseconds, but "
        "spent 15871 milliseconds"
    )
    assert any(re.fullmatch(regex.replace("\\\\", "\\"), spark_says) for regex in regexes)

    spec = load_spec({"app": "a", "sources": {"s": {"format": "text", "path": "in"}},
                      "flows": {"f": {"source": "s", "sink": {"table": "t"}}}})  # fmt: skip
    monitor = Monitor(spec, tmp_path, {"a.f": 10.0})
    durations = {"triggerExecution": 15871, "addBatch": 12100, "queryPlanning": 2050,
                 "latestOffset": 900, "walCommit": 480, "getBatch": 3}  # fmt: skip
    progress = json.dumps({"durationMs": durations})
    try:
        with caplog.at_level(logging.WARNING, logger="streamsmith"):
            for batch in range(3):
                slow = _progress("a.f", batch, query_id="x", batch_ms=15871, progress=progress)
                monitor.record(slow)
                monitor.record(_progress("a.f", batch + 10, query_id="x", batch_ms=900))
    finally:
        monitor.notifier.close()
    said = [r.getMessage() for r in caplog.records if "trigger interval" in r.getMessage()]
    assert said == [
        "a.f: batch 0 took 15.9 s, longer than the 10 s trigger interval: addBatch 12.1 s, "
        "queryPlanning 2.0 s, latestOffset 0.9 s, walCommit 0.5 s (said once; every slow "
        "batch is a slow_batch alert in the event log)"
    ]


def test_an_error_that_opens_a_python_traceback_is_named_by_what_it_raised() -> None:
    from streamsmith.monitor.recorder import first_line

    text = (
        "[STREAM_FAILED] Reason: Return Message: Traceback (most recent call last):\n"
        "  File \"a.py\", line 1, in f\n    g()\nKeyError: 'year'\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n"
        '  File "b.py", line 2, in h\n    raise UserError(x)\n'
        "streamsmith.errors.UserError: no sequence: {'country': 'Kenya'}\n"
        "\tat org.apache.spark.Foo.bar(Foo.scala:1)\n"
        "org.apache.spark.SparkException: the Java side\n"
    )
    assert first_line(text) == (
        "[STREAM_FAILED] Reason: Return Message: UserError: no sequence: {'country': 'Kenya'}"
    )
    assert first_line("plain: one line\n  detail") == "plain: one line"
