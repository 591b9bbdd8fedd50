"""A pipeline of your own, run as streamsmith runs it: event time and expectations come
from the spec; the watermark, the late-events table and the counts follow them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession

from streamsmith.config import Trigger
from streamsmith.errors import UserError
from streamsmith.io.lake import read_table, table_path
from streamsmith.monitor.eventlog import read_events
from streamsmith.monitor.status import query_statuses
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import PipelineError, run_pipeline

SPEC = {
    "name": "clicks",
    "storage_root": "data",
    "sources": {
        "clicks": {"format": "jsonl", "path": "input/clicks",
                   "schema": "user string, ts timestamp, ms int"},
    },
    "flows": {
        "checked": {
            "source": "clicks",
            "sql": "SELECT user, ts, ms FROM clicks",
            "expect": {
                "known_user": {"sql": "user LIKE 'u%'", "action": "quarantine"},
                "fast": {"sql": "ms < 1000", "action": "drop"},
                "round": "ms % 10 = 0",
            },
            "sink": {"table": "checked"},
        },
        "per_minute": {
            "source": "clicks",
            "sql": "SELECT window.start AS start, user, count(*) AS clicks "
                   "FROM clicks GROUP BY window, user",
            "event_time": {"column": "ts", "lateness": "5 minutes", "window": "1 minute"},
            "sink": {"table": "per_minute"},
        },
    },
}  # fmt: skip
# Three deliveries, each a catch-up run: the second holds an event 6.5 minutes behind
# the newest one before it; the third closes every window.
DELIVERIES = [
    [("u1", "10:01:00", 100), ("u1", "10:03:00", 1500), ("u2", "10:10:00", 120),
     ("x9", "10:02:00", 5)],
    [("u1", "10:03:30", 200), ("u2", "10:11:00", 2000)],
    [("u3", "10:40:00", 33)],
]  # fmt: skip


def write_project(folder: Path) -> Path:
    (folder / "data/input/clicks").mkdir(parents=True)
    spec = folder / "streamsmith.yml"
    spec.write_text(yaml.safe_dump(SPEC))
    return spec


def deliver(folder: Path, number: int) -> None:
    lines = [
        json.dumps({"user": user, "ts": f"2026-11-25T{hhmmss}Z", "ms": ms})
        for user, hhmmss, ms in DELIVERIES[number]
    ]
    (folder / f"data/input/clicks/part-{number}.jsonl").write_text("\n".join(lines) + "\n")


def run_all(spark: SparkSession, folder: Path, *sets: str) -> Path:
    spec_file = write_project(folder)
    for number in range(len(DELIVERIES)):
        deliver(folder, number)
        app, spec = load_pipeline(spec_file, sets=sets)
        run_pipeline(spark, build_plan(app, spec, Trigger("available-now")))
    return folder / "data"


def table(spark: SparkSession, root: Path, name: str) -> list[tuple[Any, ...]]:
    rows = read_table(spark, table_path(root, name)).collect()
    return sorted(tuple(str(value) for value in row) for row in rows)


def test_lateness_from_the_spec_decides_what_counts_and_the_late_table_holds_the_rest(
    spark: SparkSession, tmp_path: Path
) -> None:
    five = run_all(spark, tmp_path / "five")
    ten = run_all(spark, tmp_path / "ten", "flows.per_minute.event_time.lateness=10 minutes")

    counted_ten = table(spark, ten, "per_minute")
    assert counted_ten == [
        ("2026-11-25 10:01:00", "u1", "1"), ("2026-11-25 10:02:00", "x9", "1"),
        ("2026-11-25 10:03:00", "u1", "2"), ("2026-11-25 10:10:00", "u2", "1"),
        ("2026-11-25 10:11:00", "u2", "1"),
    ]  # fmt: skip
    # Five minutes: the watermark after the first delivery is 10:05, so 10:03:30 is late.
    counted_five = table(spark, five, "per_minute")
    assert set(counted_ten) - set(counted_five) == {("2026-11-25 10:03:00", "u1", "2")}
    assert set(counted_five) - set(counted_ten) == {("2026-11-25 10:03:00", "u1", "1")}
    late = read_table(spark, table_path(five, "per_minute_late")).collect()
    assert [(row.user, str(row.ts), str(row.watermark)) for row in late] == [
        ("u1", "2026-11-25 10:03:30", "2026-11-25 10:05:00")
    ]
    assert read_table(spark, table_path(ten, "per_minute_late")).isEmpty()

    # Expectations: every record is judged by each rule; counts reconcile.
    assert table(spark, five, "checked") == [
        ("u1", "2026-11-25 10:01:00", "100"), ("u1", "2026-11-25 10:03:30", "200"),
        ("u2", "2026-11-25 10:10:00", "120"), ("u3", "2026-11-25 10:40:00", "33"),
    ]  # fmt: skip
    quarantine = read_table(spark, table_path(five, "checked_quarantine")).collect()
    assert [row.reason for row in quarantine] == ["expectation known_user failed"]
    assert json.loads(quarantine[0].raw)["user"] == "x9"
    statuses = {s.query: s for s in query_statuses(read_events(five, "clicks"))}
    assert statuses["clicks.checked"].expectations == {
        "known_user": {"passed": 6, "failed": 1},
        "fast": {"passed": 5, "failed": 2},
        "round": {"passed": 5, "failed": 2},
    }
    assert statuses["clicks.checked.quarantine"].quarantined == 1
    # in 7 = out 4 + quarantined 1 + dropped 2 (fast); "round" only warns
    env = {k: v for k, v in os.environ.items() if k != "STREAMSMITH_ROOT"}
    status = subprocess.run(
        [sys.executable, "-m", "streamsmith", "status", "--format", "json"],
        cwd=tmp_path / "five", env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert status.returncode == 0, status.stderr
    by_query = {row["query"]: row for row in map(json.loads, status.stdout.splitlines())}
    assert by_query["clicks.checked"]["expectations"]["fast"] == {"passed": 5, "failed": 2}


def test_a_failing_expectation_stops_the_flow_naming_it_and_a_record(
    spark: SparkSession, tmp_path: Path
) -> None:
    spec_file = write_project(tmp_path)
    deliver(tmp_path, 0)
    sets = ["flows.checked.expect.fast.action=fail", "supervisor.max_retries=0"]
    app, spec = load_pipeline(spec_file, sets=sets)
    with pytest.raises(PipelineError) as failed:
        run_pipeline(spark, build_plan(app, spec, Trigger("available-now")))
    message = str(failed.value)
    assert message.startswith("query clicks.checked failed")
    assert 'expectation fast failed on record {"user":"u1","ts":"2026-11-25T10:03:00' in message


def test_a_record_malformed_in_a_field_the_flow_does_not_read_is_quarantined_not_kept(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Spark's JSON reader checks only the fields a query reads; the flow's table and its
    quarantine must still agree on which records are malformed, so each is counted once."""
    spec = {
        "name": "users",
        "storage_root": "data",
        "sources": {"clicks": SPEC["sources"]["clicks"]},
        "flows": {"users": {"source": "clicks", "sql": "SELECT user FROM clicks",
                            "sink": {"table": "users"}}},
    }  # fmt: skip
    inbox = tmp_path / "data/input/clicks"
    inbox.mkdir(parents=True)
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(spec))
    lines = [
        '{"user": "u1", "ts": "2026-11-25T10:00:00Z", "ms": 100}',
        '{"user": "u2", "ts": "2026-11-25T10:00:01Z", "ms": "slow"}',
        "not json",
    ]
    (inbox / "part-0.jsonl").write_text("\n".join(lines) + "\n")
    app, loaded = load_pipeline(tmp_path / "streamsmith.yml")

    run_pipeline(spark, build_plan(app, loaded, Trigger("available-now")))

    root = tmp_path / "data"
    assert table(spark, root, "users") == [("u1",)]
    quarantine = read_table(spark, table_path(root, "users_quarantine")).collect()
    assert sorted((row.reason, row.raw) for row in quarantine) == [
        ('field ms: "slow" is not an int', lines[1]),  # well-formed: names the field
        ("malformed JSON line", lines[2]),
    ]
    # The quarantine wrote the rejects the flow's own pass carried: no second read.
    progress = [r for r in read_events(root, "users") if r["event"] == "progress"]
    assert sum(r["input_rows"] for r in progress if r["query"] == "users.users") == 3
    assert [r["input_rows"] for r in progress if r["query"] == "users.users.quarantine"] == [0]
    assert sum(r["quarantined"] or 0 for r in progress) == 2  # in 3 = out 1 + quarantined 2


def test_delta_tables_take_appends_and_merge_open_windows_by_key(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The same pipeline with Delta sinks: the appended table equals the Parquet one, and
    in update mode every window is merged as it changes, the still-open one included."""
    parquet = run_all(
        spark,
        tmp_path / "parquet",
        "flows.checked.sink.format=parquet",
        "flows.per_minute.sink.format=parquet",
    )
    delta = run_all(
        spark,
        tmp_path / "delta",
        "flows.checked.sink.format=delta",
        "flows.per_minute.sink.format=delta",
        "flows.per_minute.sink.output_mode=update",
        "flows.per_minute.sink.keys=[start, user]",
    )

    assert (delta / "tables/checked/_delta_log").is_dir()
    assert table(spark, delta, "checked") == table(spark, parquet, "checked")
    # Append waits for the watermark to close a window; update has the open 10:40 one too.
    assert table(spark, delta, "per_minute") == sorted(
        [*table(spark, parquet, "per_minute"), ("2026-11-25 10:40:00", "u3", "1")]
    )
    history = spark.sql(f"DESCRIBE HISTORY delta.`{delta / 'tables/per_minute'}`").collect()
    assert {row.operation for row in history} == {"CREATE TABLE", "MERGE"}


def test_an_update_mode_delta_sink_without_keys_is_refused_before_spark(tmp_path: Path) -> None:
    spec_file = write_project(tmp_path)
    app, spec = load_pipeline(
        spec_file,
        sets=("flows.per_minute.sink.format=delta", "flows.per_minute.sink.output_mode=update"),
    )
    with pytest.raises(UserError, match="update-mode delta sink merges each row on its keys"):
        build_plan(app, spec, Trigger("available-now"))
