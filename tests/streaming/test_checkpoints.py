"""Checkpoint tools on a real query: fingerprints, check-upgrade verdicts, what it holds."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from streamsmith.config import Trigger, load_spec
from streamsmith.io.lake import read_table, table_path
from streamsmith.monitor.eventlog import read_events
from streamsmith.runtime.app import App, EventTime, FlowDefinition
from streamsmith.runtime.checkpoint_files import read_checkpoint, state_samples
from streamsmith.runtime.checkpoints import check_upgrade
from streamsmith.runtime.plan import Plan, build_plan
from streamsmith.runtime.runner import run_pipeline

SCHEMA = StructType(
    [
        StructField("user", StringType()),
        StructField("device", StringType()),
        StructField("t", TimestampType()),
        StructField("n", LongType()),
    ]
)


def tally_app(
    key: str = "user",
    aggregate: Callable[[], Column] = lambda: F.count(F.lit(1)),
    keep: Callable[[DataFrame], DataFrame] = lambda frame: frame,
) -> App:
    """Hourly tallies per ``key``; the variants are the code changes under test."""

    def transform(events: DataFrame) -> DataFrame:
        # The runtime adds the watermark and the hourly ``window`` the rule declares.
        grouped = keep(events).groupBy("window", key)
        return grouped.agg(aggregate().alias("tally")).select(
            F.col("window.start").alias("window_start"), key, "tally"
        )

    return App(
        name="tally",
        description="hourly tallies",
        flows=(
            FlowDefinition(
                name="tallies",
                transform=transform,
                record_schema=SCHEMA,
                quarantine=False,
                event_time=EventTime("t", "10 minutes", "1 hour"),
                stateful=True,
                record_late=False,
            ),
        ),
        default_spec={
            "app": "tally",
            "sources": {"events": {"format": "jsonl", "path": "input"}},
            "flows": {"tallies": {"source": "events", "sink": {"table": "tallies"}}},
        },
    )


def plan_of(app: App, root: Path) -> Plan:
    spec = load_spec(app.default_spec, storage_root=str(root))
    return build_plan(app, spec, Trigger("available-now"))


def write(root: Path, name: str, rows: list[tuple[str, str, str, int]]) -> None:
    inbox = root / "input"
    inbox.mkdir(exist_ok=True)
    lines = [json.dumps({"user": u, "device": d, "t": t, "n": n}) for u, d, t, n in rows]
    (inbox / name).write_text("\n".join(lines) + "\n")


def test_check_upgrade_tells_safe_changes_from_state_breaking_ones(
    spark: SparkSession, tmp_path: Path
) -> None:
    write(tmp_path, "a.json", [
        ("ann", "d1", "2026-11-20T09:05:00Z", 1),
        ("bob", "d2", "2026-11-20T09:10:00Z", 0),
        ("ann", "d2", "2026-11-20T10:20:00Z", 3),
    ])  # fmt: skip
    original = tally_app()
    assert check_upgrade(spark, plan_of(original, tmp_path))[0].notes == [
        "no checkpoint yet: starts fresh"
    ]
    run_pipeline(spark, plan_of(original, tmp_path))

    (same,) = check_upgrade(spark, plan_of(original, tmp_path))
    assert same.resumable and same.summary == "resumes safely"

    filtered = tally_app(keep=lambda frame: frame.where(F.col("n") > 0))
    (verdict,) = check_upgrade(spark, plan_of(filtered, tmp_path))
    assert verdict.resumable, verdict.reasons

    by_device = tally_app(key="device")
    (verdict,) = check_upgrade(spark, plan_of(by_device, tmp_path))
    assert not verdict.resumable
    schema, state = verdict.reasons  # the table's column changes too
    assert schema.startswith("the output schema changed (window_start timestamp, user string")
    assert "stateful operator 1 (Aggregate) changed its keys or aggregates" in state
    assert "user" in state and "device" in state

    summed = tally_app(aggregate=lambda: F.sum("n"))
    (verdict,) = check_upgrade(spark, plan_of(summed, tmp_path))
    assert not verdict.resumable and "count(1)" in verdict.reasons[0]
    assert "sum(n)" in verdict.reasons[0]

    # The safe change really resumes: Spark accepts the checkpoint and goes on.
    write(tmp_path, "b.json", [
        ("cat", "d3", "2026-11-20T12:00:00Z", 0),  # filtered out by the new code
        ("ann", "d1", "2026-11-20T12:30:00Z", 2),  # moves the watermark past 10:00-11:00
    ])  # fmt: skip
    run_pipeline(spark, plan_of(filtered, tmp_path))
    tallies = read_table(spark, table_path(tmp_path, "tallies"))
    assert sorted((str(r.window_start)[11:16], r.user, r.tally) for r in tallies.collect()) == [
        ("09:00", "ann", 1),
        ("09:00", "bob", 1),  # counted by the old code, before the filter
        ("10:00", "ann", 1),
    ]

    # What the checkpoint holds, from its files and the event log, as Spark's readers say.
    output = plan_of(filtered, tmp_path).outputs[0]
    view = read_checkpoint(output.query_name, output.checkpoint, read_events(tmp_path))
    assert view.exists and view.last_batch == view.last_commit
    assert view.offsets == [{"logOffset": 1}]  # the second file; no-data batches add none
    (operator,) = view.operators
    (meta,) = spark.read.format("state-metadata").load(str(output.checkpoint)).collect()
    assert (operator.operator_id, operator.name, operator.stores, operator.partitions) == (
        meta.operatorId,
        meta.operatorName,
        (meta.stateStoreName,),
        meta.numPartitions,
    )
    assert (view.first_commit, view.last_commit) == (meta.minBatchId, meta.maxBatchId)
    assert (operator.rows, operator.rows_batch) == (1, view.last_commit)  # ann 12:00
    (row,) = state_samples(spark, view, rows=5)[(0, "default")]
    assert row["key"]["user"] == "ann" and row["value"]["count"] == 1
