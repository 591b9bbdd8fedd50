"""Scheduled catch-ups in one warm session, on a fake clock: runs on time, an overlapping
tick skipped, a run with nothing new that starts no query, a missed run made up once on
start, a failed run alerted with the next tick still run; and the nothing-new check
against a real broker."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from pyspark.sql import SparkSession

from streamsmith.config import Trigger
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.lake import read_table, table_path
from streamsmith.monitor.eventlog import read_events
from streamsmith.monitor.status import ScheduleStatus, query_statuses
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.catchup import nothing_new
from streamsmith.runtime.plan import Plan, build_plan
from streamsmith.runtime.runner import run_pipeline
from streamsmith.runtime.scheduler import ManualClock, Scheduler
from streamsmith.runtime.supervisor import plan_monitor

SPEC = {
    "name": "clicks",
    "storage_root": "data",
    "trigger": "available-now",
    "schedule": "* * * * *",
    "supervisor": {"max_retries": 0},
    "maintenance": {"vacuum": "after_run", "retain": "1 hour"},
    "sources": {"clicks": {"format": "jsonl", "path": "input",
                           "schema": "user string, ms int"}},
    "flows": {
        "raw": {"source": "clicks", "sql": "SELECT user, ms FROM clicks",
                "expect": {"fast": {"sql": "ms < 1000", "action": "fail"}},
                "sink": {"table": "raw"}},
    },
}  # fmt: skip


def at(text: str) -> datetime:
    return datetime.fromisoformat(f"2026-11-25T{text}+00:00")


def deliver(folder: Path, name: str, rows: list[tuple[str, int]]) -> None:
    lines = [json.dumps({"user": user, "ms": ms}) for user, ms in rows]
    (folder / "data/input" / f"{name}.jsonl").write_text("\n".join(lines) + "\n")


def plan_of(folder: Path, document: dict[str, Any]) -> Plan:
    (folder / "data/input").mkdir(parents=True, exist_ok=True)
    (folder / "streamsmith.yml").write_text(yaml.safe_dump(document))
    return build_plan(*load_pipeline(folder / "streamsmith.yml"))


@contextmanager
def scheduling(spark: SparkSession, plan: Plan, clock: ManualClock) -> Iterator[Scheduler]:
    """A started scheduler with its monitor, as ``run_schedules`` makes it; stopped after."""
    monitor = plan_monitor(plan)
    scheduler = Scheduler(spark, plan, monitor, clock)
    monitor.attach(spark, scheduler.health)
    try:
        scheduler.start()
        yield scheduler
    finally:
        scheduler.stop()
        monitor.detach(spark)


def finish_runs(scheduler: Scheduler) -> None:
    """Drive the scheduler (the clock standing still) until no run is going."""
    stop = threading.Event()
    while scheduler.running:
        scheduler.wait(stop)
        scheduler.step()


def runs(root: Path) -> list[tuple[str, str, str]]:
    """(event, due time's hh:mm, message) of every run event, in order."""
    return [
        (e["event"], str(e.get("scheduled_for", ""))[11:16], str(e.get("message")))
        for e in read_events(root, "clicks")
        if str(e["event"]).startswith("run_") or e["event"] == "scheduled"
    ]


def test_scheduled_runs_in_one_session(spark: SparkSession, tmp_path: Path) -> None:
    plan = plan_of(tmp_path, SPEC)
    root = plan.root
    deliver(tmp_path, "a", [("u1", 10), ("u2", 20)])
    clock = ManualClock(at("10:00:30"))
    with scheduling(spark, plan, clock) as scheduler:  # a first start: nothing missed
        scheduler.step()
        assert runs(root) == [("scheduled", "", "flows raw")]
        clock.moment = at("10:01:00")
        scheduler.step()  # starts the run due at 10:01
        clock.moment = at("10:02:05")
        scheduler.step()  # 10:02 is due while 10:01 still runs: skipped
        finish_runs(scheduler)
        clock.moment = at("10:03:00")
        scheduler.step()  # nothing new: no query starts
        assert not scheduler.running
    assert sorted(read_table(spark, table_path(root, "raw")).collect()) == [("u1", 10), ("u2", 20)]
    assert [(kind, due) for kind, due, _ in runs(root)] == [
        ("scheduled", ""),
        ("run_started", "10:01"),
        ("run_skipped", "10:02"),
        ("run_finished", "10:01"),
        ("run_started", "10:03"),
        ("run_finished", "10:03"),
    ]
    events = runs(root)
    assert events[2][2] == "the run due at 2026-11-25T10:01:00.000Z is still going"
    assert events[3][2].startswith("2 queries, ") and events[3][2].endswith(" 0 failed")
    finished = [e for e in read_events(root, "clicks") if e["event"] == "run_finished"]
    assert finished[0]["input_rows"] == 2  # what the flow read (its quarantine may reread)
    assert events[5][2].startswith("nothing new")
    # The run that ran ends with its tables' vacuum; the one with nothing new does not.
    vacuums = [(e["table"], e["trigger"], e["message"]) for e in read_events(root, "clicks")
               if e["event"] == "maintenance"]  # fmt: skip
    assert vacuums == [
        ("raw", "after_run", "0 files deleted, unused for 1 hours"),
        ("raw_quarantine", "after_run", "0 files deleted, unused for 1 hours"),
    ]

    # The process was down at 10:04 and 10:05: one run makes up for them on start. Then a
    # record fails its expectation: the run fails and alerts; the next tick runs anyway.
    clock.moment = at("10:05:30")
    with scheduling(spark, plan, clock) as scheduler:
        missed, ended = runs(root)[-2:]
        assert missed == (
            "run_started",
            "10:05",
            "missed at 2026-11-25T10:05:00.000Z: run once on start",
        )
        assert ended[:2] == ("run_finished", "10:05")  # nothing new since 10:03
        deliver(tmp_path, "b", [("u3", 5000)])
        for minute in ("10:06:00", "10:07:00"):
            clock.moment = at(minute)
            scheduler.step()
            finish_runs(scheduler)
        status = {s.query: s for s in query_statuses(read_events(root))}["clicks.raw"]
        assert (status.state, status.schedule) == ("scheduled", ScheduleStatus(
            "* * * * *", "2026-11-25T10:07:00.000Z", "failed", "2026-11-25T10:08:00.000Z"
        ))  # fmt: skip
    events = runs(root)[-4:]
    assert [(kind, due) for kind, due, _ in events] == [
        ("run_started", "10:06"),
        ("run_failed", "10:06"),
        ("run_started", "10:07"),
        ("run_failed", "10:07"),
    ]
    assert "expectation fast failed" in events[1][2]
    log = read_events(root, "clicks")
    alerts = [e for e in log if e["event"] == "alert" and e.get("rule") == "run_failed"]
    assert len(alerts) == 2
    assert alerts[0]["message"].startswith("scheduled run clicks due at 2026-11-25T10:06:00")
    stopped = {s.query: s for s in query_statuses(log)}["clicks.raw"]
    assert stopped.state == "stopped" and stopped.schedule is not None
    assert (stopped.schedule.cron, stopped.schedule.next_run) == ("* * * * *", None)


def test_nothing_new_from_kafka_only_when_the_broker_confirms_the_end(
    spark: SparkSession, tmp_path: Path, broker: EmbeddedBroker, topic: str, produce: Any
) -> None:
    document = {
        **SPEC,
        "kafka": {"bootstrap_servers": broker.bootstrap},
        "sources": {"clicks": {"format": "kafka", "schema": "user string, ms int",
                               "options": {"subscribe": topic, "startingOffsets": "earliest"}}},
        "flows": {"raw": {"source": "clicks", "sink": {"table": "raw"},
                          "sql": "SELECT user, ms FROM clicks"}},
    }  # fmt: skip
    document.pop("schedule")
    plan = plan_of(tmp_path, document)
    produce(topic, [json.dumps({"user": f"u{n}", "ms": n}).encode() for n in range(6)])
    assert nothing_new(plan) is None  # no checkpoint yet
    run_pipeline(spark, build_plan(plan.app, plan.spec, Trigger("available-now")))
    reason = nothing_new(plan)
    assert reason is not None and reason.endswith("(3 Kafka partitions)")
    produce(topic, [b'{"user": "u9", "ms": 9}'])
    assert nothing_new(plan) is None


def test_the_scheduler_compacts_a_table_when_its_maintenance_cron_is_due(
    spark: SparkSession, tmp_path: Path
) -> None:
    document = copy.deepcopy(SPEC)
    document["schedule"] = "0 0 1 1 *"  # the flow's catch-ups: not due in this test
    document["maintenance"] = {"optimize": "30 10 * * *"}
    plan = plan_of(tmp_path, document)
    raw = str(table_path(plan.root, "raw"))
    for user in ("u1", "u2"):  # two appends: two small files
        spark.createDataFrame([(user, 1)], "user string, ms int").write.format("delta").mode(
            "append"
        ).save(raw)
    clock = ManualClock(at("10:29:00"))
    with scheduling(spark, plan, clock) as scheduler:
        scheduler.step()
        clock.moment = at("10:30:00")
        scheduler.step()
        clock.moment = at("10:31:00")
        scheduler.step()  # due once a day: not again

    done = [
        (e["table"], e["operation"], e["trigger"], e["files_removed"], e["files_added"])
        for e in read_events(plan.root, "clicks")
        if e["event"] == "maintenance"
    ]
    assert done == [("raw", "optimize", "30 10 * * *", 2, 1)]  # raw_quarantine: not written
    assert sorted(read_table(spark, table_path(plan.root, "raw")).collect()) == [
        ("u1", 1), ("u2", 1)
    ]  # fmt: skip
    (status,) = [s for s in query_statuses(read_events(plan.root)) if s.query == "clicks.raw"]
    assert status.maintenance["raw optimize"].endswith(": 2 files compacted into 1")
