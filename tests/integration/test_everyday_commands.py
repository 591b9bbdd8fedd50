"""Everyday commands as a user runs them: ``status`` that reads in an 80-column terminal,
and ``status``, ``checkpoint show``, ``apps``, ``dry-run --plan-only`` and ``--help``
answered from files, without starting a JVM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from test_cli import command_env, streamsmith
from typer.testing import CliRunner

from streamsmith.cli import cli
from streamsmith.config import Trigger
from streamsmith.monitor.eventlog import EventLog, now_text, read_events
from streamsmith.monitor.status import QueryStatus, query_statuses
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import run_pipeline
from streamsmith.scaffold import init_project

FLOW = "device_attribution_with_dhcp_leases_and_owners"
# (query, state) as the runs below leave them.
QUERIES = {
    f"secops.{FLOW}": "active",
    f"secops.{FLOW}.quarantine": "active",
    f"secops.{FLOW}.late": "restarting",
    "secops.alerts_to_kafka_keyed_by_alert_id": "failed",
    "cloudtrail.cloudtrail_events": "stopped",
}


def record_runs(root: Path) -> None:
    """The event log of two apps' runs, as their processes write it (this process's pid
    stands for a live one)."""
    secops, cloudtrail = EventLog(root, "secops"), EventLog(root, "cloudtrail")
    for query in QUERIES:
        (cloudtrail if query.startswith("cloudtrail.") else secops).write(
            {"event": "started", "query": query}
        )
    for batch, query in enumerate(QUERIES):
        log = cloudtrail if query.startswith("cloudtrail.") else secops
        log.write({"event": "progress", "query": query, "query_id": query, "batch_id": batch,
                   "batch_time": now_text(), "input_rate": 250.0, "process_rate": 1800.5,
                   "lag": 3, "quarantined": 7, "late": 2})  # fmt: skip
    secops.write({"event": "failure", "query": f"secops.{FLOW}.late", "message": "disk full"})
    secops.write({"event": "gave_up", "query": "secops.alerts_to_kafka_keyed_by_alert_id",
                  "message": "the broker at 127.0.0.1:9 refused the connection " * 3})  # fmt: skip
    cloudtrail.write({"event": "terminated", "query": "cloudtrail.cloudtrail_events"})


def test_status_reads_at_80_columns_and_wide_prints_every_field(tmp_path: Path) -> None:
    record_runs(tmp_path)
    narrow = streamsmith("status", "--root", str(tmp_path), cwd=tmp_path, timeout=60,
                         env={"COLUMNS": "80"})  # fmt: skip
    assert narrow.returncode == 0, narrow.stderr
    lines = narrow.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), narrow.stdout
    assert lines[:2] == ["queries under .", "cloudtrail: 1 flow, 1 query"]
    assert f"  flow {FLOW}" in lines and "secops: 2 flows, 4 queries" in lines
    for query, state in QUERIES.items():  # the whole name on a line, its state after it
        (at,) = [n for n, line in enumerate(lines) if line.split()[:1] == [query]]
        assert state in " ".join(lines[at : at + 2]).split(), lines[at : at + 2]
    assert "error: the broker at 127.0.0.1:9 refused" in narrow.stdout  # the failed one's
    assert "error: disk full" in narrow.stdout  # and the restarting one's
    assert "in 250/s" in narrow.stdout and "processed 1800/s" in narrow.stdout
    assert "quarantined 7" in narrow.stdout and "late 2" in narrow.stdout

    wide = streamsmith("status", "--root", str(tmp_path), "--wide", cwd=tmp_path, timeout=60,
                       env={"COLUMNS": "80"})  # fmt: skip
    assert wide.returncode == 0, wide.stderr
    header = next(line for line in wide.stdout.splitlines() if "last_batch_time" in line)
    assert [cell.strip() for cell in header.split("┃")[1:-1]] == [
        field.name for field in fields(QueryStatus)
    ]
    for query in QUERIES:
        assert f" {query} " in wide.stdout

    as_json = streamsmith("status", "--root", str(tmp_path), "--format", "json", cwd=tmp_path)
    expected = [s.as_dict() for s in query_statuses(read_events(tmp_path))]
    assert [json.loads(line) for line in as_json.stdout.splitlines()] == expected


def test_status_watch_redraws_until_interrupted(tmp_path: Path) -> None:
    record_runs(tmp_path)
    watching = subprocess.Popen(
        [sys.executable, "-m", "streamsmith", "status", "--root", str(tmp_path), "--watch",
         "0.2", "cloudtrail"],
        cwd=tmp_path, env=command_env({"COLUMNS": "80"}), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert watching.stdout is not None
        seen: list[str] = []
        for line in watching.stdout:  # a header line starts each frame
            seen.append(line)
            if sum(line.startswith("every 0.2s, ") for line in seen) == 3:
                break  # two whole frames drawn
        watching.send_signal(signal.SIGINT)
        _, errors = watching.communicate(timeout=30)
    finally:
        watching.kill()
    assert watching.returncode == 0 and "Traceback" not in errors, errors
    frame = "".join(seen).split("every 0.2s, ")[1]
    assert "\ncloudtrail: 1 flow, 1 query\n" in frame and "secops" not in frame
    assert "cloudtrail.cloudtrail_events  stopped" in frame


@pytest.fixture
def no_java(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose only java (``$JAVA_HOME/bin/java`` and first on PATH) leaves
    a mark and fails: a command that starts a JVM fails and leaves the mark."""
    home = tmp_path / "no-jvm"
    (home / "bin").mkdir(parents=True)
    mark = home / "a-jvm-was-started"
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\ntouch {mark}\nexit 1\n")
    java.chmod(0o755)
    path = f"{home / 'bin'}:{command_env()['PATH']}"
    return {"JAVA_HOME": str(home), "PATH": path}, mark


def test_everyday_commands_start_no_jvm(
    spark: SparkSession, tmp_path: Path, no_java: tuple[dict[str, str], Path]
) -> None:
    project = tmp_path / "clicks"
    init_project(project)
    app, spec = load_pipeline(project / "streamsmith.yml")
    run_pipeline(spark, build_plan(app, spec, Trigger("available-now")))
    checkpoint = spec.root / "checkpoints/clicks/clicks_per_minute"
    (meta,) = spark.read.format("state-metadata").load(str(checkpoint)).collect()
    state_rows = spark.read.format("statestore").load(str(checkpoint)).count()

    env, mark = no_java
    ran = {
        command: streamsmith(*command.split(), cwd=project, timeout=60, env=env)
        for command in ("--help", "apps", "dry-run --plan-only", "status", "checkpoint show")
    }
    for command, result in ran.items():
        assert result.returncode == 0, (command, result.stderr)
    assert not mark.exists()
    assert "checkpoint" in ran["--help"].stdout and "status" in ran["--help"].stdout
    assert "cloudtrail: CloudTrail log files to a date-partitioned Delta table" in (
        ran["apps"].stdout
    )
    assert f"checkpoint {checkpoint}\n" in ran["dry-run --plan-only"].stdout
    status = ran["status"].stdout.split()
    assert status[status.index("clicks.clicks_per_minute") + 1] == "stopped"
    shown = ran["checkpoint show"].stdout
    last = meta.maxBatchId
    assert f"clicks.clicks_per_minute: {checkpoint}\n" in shown
    assert f"last batch {last}, last committed {last}" in shown
    assert (
        f"state: operator 0 stateStoreSave store default, {meta.numPartitions} partitions, "
        f"batches {meta.minBatchId}..{last}, {state_rows} rows at batch {last}\n"
    ) in shown

    # Only the state's rows need Spark (here the tests' own session).
    result = CliRunner().invoke(cli, ["checkpoint", "show", str(project), "clicks_per_minute",
                                      "--state-rows", "1"])  # fmt: skip
    assert result.exit_code == 0, result.output
    (row,) = [line for line in result.output.splitlines() if line.startswith("    default: ")]
    assert set(json.loads(row.removeprefix("    default: "))) == {"key", "value", "partition_id"}
