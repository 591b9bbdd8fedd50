"""Schedules and the nothing-new check, before Spark: cron due times, the spec's rules,
status of scheduled runs, and what a checkpoint says was read."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from streamsmith.config import SparkSpec, Trigger
from streamsmith.errors import UserError
from streamsmith.monitor.status import ScheduleStatus, query_statuses
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.catchup import (
    SMALL_BACKLOG_BYTES,
    committed_batch,
    input_files,
    nothing_new,
    small_backlog,
)
from streamsmith.runtime.describe import describe_plan
from streamsmith.runtime.plan import Schedule, build_plan
from streamsmith.runtime.scheduler import due_after, due_at_or_before, last_due_times
from streamsmith.spark.session import CLIENT_COMPILER, default_conf

SPEC = {
    "name": "clicks",
    "storage_root": "data",
    "trigger": "available-now",
    "schedule": "*/15 * * * *",
    "sources": {"clicks": {"format": "jsonl", "path": "input",
                           "schema": "user string, ms int"}},
    "flows": {
        "raw": {"source": "clicks", "sql": "SELECT user, ms FROM clicks",
                "sink": {"table": "raw"}},
        "slow": {"source": "clicks", "sql": "SELECT user FROM clicks WHERE ms > 100",
                 "sink": {"table": "slow"}, "schedule": "@daily"},
    },
}  # fmt: skip


def at(text: str) -> datetime:
    return datetime.fromisoformat(f"2026-11-25T{text}+00:00")


def write(folder: Path, document: dict[str, object], *paths: str) -> Path:
    for path in paths:
        (folder / path).mkdir(parents=True, exist_ok=True)
    spec = folder / "streamsmith.yml"
    spec.write_text(yaml.safe_dump(document))
    return spec


def test_due_times_follow_the_cron_expression() -> None:
    assert due_after("*/15 * * * *", at("10:14:59")) == at("10:15:00")
    assert due_after("*/15 * * * *", at("10:15:00")) == at("10:30:00")
    assert due_at_or_before("*/15 * * * *", at("10:15:00")) == at("10:15:00")
    assert due_at_or_before("*/15 * * * *", at("10:29:59")) == at("10:15:00")
    assert due_at_or_before("@daily", at("10:29:59")) == at("00:00:00")


def test_the_latest_run_of_each_schedule_is_read_from_the_log() -> None:
    events = [
        {"event": "run_started", "schedule": "a", "scheduled_for": "2026-11-25T10:00:00.000Z"},
        {"event": "run_skipped", "schedule": "a", "scheduled_for": "2026-11-25T10:15:00.000Z"},
        {"event": "run_finished", "schedule": "b", "scheduled_for": "2026-11-25T11:00:00.000Z"},
        {"event": "run_started", "schedule": "b", "scheduled_for": "2026-11-25T09:00:00.000Z"},
    ]
    assert last_due_times(events) == {"a": at("10:15:00"), "b": at("09:00:00")}


def test_flows_take_their_own_schedule_or_the_pipelines(tmp_path: Path) -> None:
    app, spec = load_pipeline(write(tmp_path, SPEC, "data/input"))
    plan = build_plan(app, spec)
    assert {s: [f.name for f in flows] for s, flows in plan.schedules.items()} == {
        Schedule("clicks", "*/15 * * * *"): ["raw"],
        Schedule("clicks.slow", "@daily"): ["slow"],
    }
    assert "schedule clicks.slow: @daily (UTC)" in describe_plan(plan)
    assert not build_plan(app, spec, Trigger("available-now")).schedules  # --trigger: run now


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schedule": "*/15 * * *"}, "invalid value for 'schedule'.*5-field cron"),
        ({"schedule": "0 0 * * * *"}, "invalid value for 'schedule'.*5-field cron"),
        ({"schedule": "61 * * * *"}, "invalid value for 'schedule'"),
        ({"trigger": "interval=10s"},
         r"schedule \(in .*streamsmith.yml\) starts scheduled catch-up runs, which need "
         "trigger available-now, but flow 'raw' has trigger interval=10s: set trigger to"),
    ],
)  # fmt: skip
def test_a_schedule_needs_a_cron_expression_and_available_now(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    with pytest.raises(UserError, match=message):
        app, spec = load_pipeline(write(tmp_path, {**SPEC, **change}, "data/input"))
        build_plan(app, spec)


def test_a_flow_schedule_names_its_key_and_the_flow_trigger(tmp_path: Path) -> None:
    document = json.loads(json.dumps(SPEC))
    document["flows"]["slow"]["trigger"] = "once"
    app, spec = load_pipeline(write(tmp_path, document, "data/input"))
    with pytest.raises(UserError, match="flows.slow.schedule .* set flows.slow.trigger to"):
        build_plan(app, spec)


def test_status_shows_each_querys_last_run_and_next_due_time() -> None:
    run = {"app": "a", "schedule": "a", "cron": "*/15 * * * *", "queries": ["a.f", "a.f.q"]}
    events = [
        {"event": "scheduled", "pid": 7, "next_due": "T1", **run},
        {"event": "run_started", "scheduled_for": "T1", "next_due": "T2", **run},
        {"event": "started", "app": "a", "query": "a.f", "pid": 7},
        {"event": "run_skipped", "scheduled_for": "T2", "next_due": "T3", **run},
        {"event": "gave_up", "app": "a", "query": "a.f", "pid": 7, "message": "boom"},
        {"event": "terminated", "app": "a", "query": "a.f"},
        {"event": "run_failed", "scheduled_for": "T1", "next_due": "T3", "pid": 7,
         "message": "query a.f failed: boom", **run},
    ]  # fmt: skip
    rows = {s.query: s for s in query_statuses(events, alive=lambda pid: True)}
    main = rows["a.f"]
    assert main.state == "scheduled"
    assert main.schedule == ScheduleStatus("*/15 * * * *", "T1", "failed", "T3")
    assert main.as_dict()["schedule"]["next_run"] == "T3"
    assert (main.last_error, rows["a.f.q"].last_error) == ("boom", None)
    assert rows["a.f.q"].state == "scheduled"
    gone = query_statuses(events, alive=lambda pid: False)[0]
    assert gone.state == "stopped (process gone)"
    nothing = [{"event": "run_finished", "nothing_new": True, **run}]
    schedule = query_statuses(nothing)[0].schedule
    assert schedule is not None and schedule.last_run_state == "nothing new"
    one_off = [{"event": "run_finished", "app": "a", "queries": ["a.f"], "nothing_new": True}]
    assert query_statuses(one_off)[0].schedule is None  # a row as before: no schedule


# ---------------------------------------------------------------------------------------
# Nothing new: the checkpoint's logs against the input folder


def checkpoint(folder: Path, batch: int, files: list[Path], committed: bool = True) -> None:
    """A file-source query's checkpoint whose batches up to ``batch`` read ``files``."""
    for log in ("offsets", "commits", "sources/0"):
        (folder / log).mkdir(parents=True, exist_ok=True)
    (folder / "offsets" / str(batch)).write_text('v1\n{}\n{"logOffset":0}')
    if committed:
        (folder / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    entries = [json.dumps({"path": f"file://{path}", "timestamp": 1, "batchId": 0})
               for path in files]  # fmt: skip
    (folder / "sources/0/0").write_text("\n".join(["v1", *entries]))


def test_nothing_new_when_every_query_logged_every_file(tmp_path: Path) -> None:
    document = {**SPEC, "flows": {"raw": SPEC["flows"]["raw"]}}  # type: ignore[index]
    app, spec = load_pipeline(write(tmp_path, document, "data/input"))
    plan = build_plan(app, spec)
    inbox = tmp_path / "data/input"
    assert nothing_new(plan) is None  # no checkpoint yet: the first run runs
    read = [inbox / "a.jsonl", inbox / "day=1/b.jsonl"]
    for path in read:
        path.parent.mkdir(exist_ok=True)
        path.write_text("{}\n")
    (inbox / ".b.jsonl.crc").write_text("")
    (inbox / "_SUCCESS").write_text("")
    (inbox / "c.jsonl._COPYING_").write_text("")
    for output in plan.outputs:
        checkpoint(output.checkpoint, 3, read)
    reason = nothing_new(plan)
    assert reason == (
        "nothing new: the last committed batches of the 2 queries read all of their input (2 files)"
    )
    (inbox / "d.jsonl").write_text("{}\n")
    assert nothing_new(plan) is None  # a new file
    (inbox / "d.jsonl").unlink()
    (plan.outputs[-1].checkpoint / "offsets/4").write_text('v1\n{}\n{"logOffset":1}')
    assert committed_batch(plan.outputs[-1].checkpoint) is None
    assert nothing_new(plan) is None  # batch 4 planned, not committed: it runs again


def test_the_listing_keeps_what_spark_would_read(tmp_path: Path) -> None:
    for name in ("a.json", "b.txt", "_metadata", "x=1/_c.json", "_x/d.json", ".h/e.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    names = {Path(p).relative_to(tmp_path).as_posix() for p in input_files(tmp_path, None) or ()}
    assert names == {"a.json", "b.txt", "_metadata"}
    only_json = input_files(tmp_path, "*.json") or set()
    assert {Path(p).name for p in only_json} == {"a.json"}
    # A glob whose meaning differs between Hadoop and fnmatch is not applied: all count.
    assert len(input_files(tmp_path, "{a,b}.*") or ()) == 3
    assert input_files(tmp_path / "missing", None) is None


def test_a_small_backlog_of_files_is_told_before_spark_starts(tmp_path: Path) -> None:
    """A catch-up's JVM compiles with the client compiler only when the files its queries
    have not read come to little: counted from the listing and the main query's log."""
    document = {**SPEC, "flows": {"raw": SPEC["flows"]["raw"]}}  # type: ignore[index]
    app, spec = load_pipeline(write(tmp_path, document, "data/input"))
    plan = build_plan(app, spec)
    inbox = tmp_path / "data/input"
    (inbox / "a.jsonl").write_text("{}\n" * 10)
    assert small_backlog(plan) == 30
    checkpoint(plan.outputs[0].checkpoint, 0, [inbox / "a.jsonl"])
    (inbox / "b.jsonl").write_text("{}\n")
    assert small_backlog(plan) == 3  # what its queries read does not count again
    with (inbox / "big.jsonl").open("wb") as big:
        big.truncate(SMALL_BACKLOG_BYTES)  # a sparse file: the size is what counts
    assert small_backlog(plan) is None
    (inbox / "big.jsonl").unlink()
    assert small_backlog(build_plan(app, spec, Trigger("interval", 0.0))) is None  # always on

    def options(**given: bool) -> list[str]:
        return default_conf(SparkSpec(), **given)["spark.driver.extraJavaOptions"].split()

    assert CLIENT_COMPILER in options(client_compiler=True)
    assert CLIENT_COMPILER not in options()
