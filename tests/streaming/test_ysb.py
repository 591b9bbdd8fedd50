"""The Yahoo Streaming Benchmark app against the generator's ground truth: from files
(with the PostgreSQL flow) and from Kafka with the JSON decoded at the source."""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession

from streamsmith.apps import get_app
from streamsmith.apps.ysb import kafka_overrides
from streamsmith.config import Trigger, load_spec
from streamsmith.generate import produce_all
from streamsmith.generate.ysb import YsbData, write_ysb, ysb_data
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.lake import is_table, read_table, replace_static_table, table_path
from streamsmith.monitor.eventlog import read_events
from streamsmith.monitor.progress import records_read
from streamsmith.runtime.flow_batches import CARRY_CHARS, FLOW_METRIC
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import run_pipeline
from streamsmith.schemas.ysb import CAMPAIGNS_SCHEMA
from waiting import wait_for

DELAY = timedelta(seconds=10)
Produce = Callable[..., None]


def generated(events: int = 30_000, rate: float = 500) -> YsbData:
    """A minute of events (six windows) by default, 1% of lines broken; the newest events
    leave the last windows open."""
    return ysb_data(events, rate=rate, chunks=3, seed=4, corrupt_fraction=0.01)


def lake_views(spark: SparkSession, root: Path) -> Counter[tuple[str, datetime]]:
    rows = read_table(spark, table_path(root, "campaign_windows")).collect()
    assert all(r.window_end - r.window_start == timedelta(seconds=10) for r in rows)
    return Counter({(r.campaign_id, r.window_start.replace(tzinfo=UTC)): r.views for r in rows})


def test_views_per_campaign_and_window_from_files_to_the_lake_and_postgresql(
    spark: SparkSession, tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMSMITH_PG_DSN", pg_dsn)
    data = generated()
    write_ysb(data, tmp_path / "input/ysb")
    replace_static_table(table_path(tmp_path, "ysb_campaigns"), data.campaigns, CAMPAIGNS_SCHEMA)
    app = get_app("ysb")
    sets = ["flows.campaign_windows_pg.enabled=true", "sources.ads.max_files_per_trigger=1"]
    spec = load_spec(app.default_spec, sets=sets, storage_root=str(tmp_path))

    run_pipeline(spark, build_plan(app, spec, Trigger("available-now")))

    closed = data.closed_views(DELAY)
    assert len({window for _, window in closed}) == 4  # of the six, two are still open
    assert lake_views(spark, tmp_path) == closed
    quarantine = read_table(spark, table_path(tmp_path, "campaign_windows_quarantine"))
    assert quarantine.count() == data.corrupt > 0
    assert read_table(spark, table_path(tmp_path, "campaign_windows_late")).count() == 0
    # Update mode keeps every window current, the open ones included.
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute("SELECT campaign_id, window_start, views FROM campaign_windows")
        upserted = Counter({(c, w.replace(tzinfo=UTC)): n for c, w, n in rows.fetchall()})
    assert upserted == data.views
    # Both flows count every record they read, the PostgreSQL flow too (it has no side
    # query): its records read are every line, not the views Spark's JSON reader would
    # have let through with the filter pushed into it.
    assert flow_reports(tmp_path, "ysb.campaign_windows") == (len(data.lines), True)
    assert flow_reports(tmp_path, "ysb.campaign_windows_pg") == (len(data.lines), True)


def flow_reports(root: Path, query: str) -> tuple[int, bool]:
    """``query``'s records read over all its batches, and whether any batch carried the
    flow's per-batch report (the metric its side queries skip by). Spark's own input rows
    count files: the source reads each whole to number its lines."""
    progress = [
        json.loads(record["progress"])
        for record in read_events(root, "ysb")
        if record["event"] == "progress" and record["query"] == query
    ]
    rows = sum(records_read(p) for p in progress)
    return rows, any(FLOW_METRIC in p.get("observedMetrics", {}) for p in progress)


def test_views_from_kafka_with_json_decoded_at_the_source(
    spark: SparkSession, tmp_path: Path, broker: EmbeddedBroker
) -> None:
    data = generated(10_000, rate=200)  # 50 s: three windows close
    broker.create_topic("ysb-ads", partitions=3)
    lines = data.lines
    produce_all(broker.bootstrap, "ysb-ads", lines, [None] * len(lines))
    replace_static_table(table_path(tmp_path, "ysb_campaigns"), data.campaigns, CAMPAIGNS_SCHEMA)
    app = get_app("ysb")
    overrides = kafka_overrides(broker.bootstrap, "ysb-ads")
    spec = load_spec(app.default_spec, overrides=overrides, storage_root=str(tmp_path))

    run_pipeline(spark, build_plan(app, spec, Trigger("available-now")))

    # Three partitions are read in any interleaving: the watermark is the newest event
    # seen, so the same windows close as from the files.
    closed = data.closed_views(DELAY)
    assert len({window for _, window in closed}) == 3
    assert lake_views(spark, tmp_path) == closed
    quarantine = read_table(spark, table_path(tmp_path, "campaign_windows_quarantine"))
    assert quarantine.count() == data.corrupt


def test_always_on_from_kafka_records_late_events_with_the_flows_watermark(
    spark: SparkSession, tmp_path: Path, broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """Always on, the late-events query cuts the topic into the flow query's batches, so
    each of its batches finds the watermark the flow dropped events with (no waiting,
    no fallback)."""
    broker.create_topic("ysb-live", partitions=3)

    def send(data: YsbData, _name: str) -> None:
        produce_all(broker.bootstrap, "ysb-live", data.lines, [None] * len(data.lines))

    kafka = kafka_overrides(broker.bootstrap, "ysb-live")
    check_late_events_always_on(spark, tmp_path, kafka, send)
    assert "never read the same input" not in caplog.text


def test_always_on_from_files_records_late_events_with_the_flows_watermark(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Files arriving one by one are cut differently by the flow's and the late-events
    query's listings; matching by file, each late event still gets the watermark of the
    flow's batch that read it (no waiting, no fallback)."""
    inbox = tmp_path / "input/ysb"
    inbox.mkdir(parents=True)

    def send(data: YsbData, name: str) -> None:
        for index, file in enumerate(write_ysb(data, tmp_path / f"staged-{name}")):
            file.replace(inbox / f"{name}-{index}.json")
            time.sleep(0.7)

    check_late_events_always_on(spark, tmp_path, {}, send)
    assert "using the watermark of earlier batches" not in caplog.text


def check_late_events_always_on(
    spark: SparkSession,
    root: Path,
    overrides: Mapping[str, Any],
    send: Callable[[YsbData, str], None],
) -> None:
    """Run ysb always on; send 40 s of events, then 40 events too late for their windows;
    check the late table holds exactly those, each with the flow's watermark."""
    on_time = ysb_data(2_000, rate=50, chunks=4, seed=5)  # 40 s of event time
    late = ysb_data(40, rate=100, chunks=1, seed=6, start=on_time.first_time + timedelta(seconds=5))
    replace_static_table(table_path(root, "ysb_campaigns"), on_time.campaigns, CAMPAIGNS_SCHEMA)
    app = get_app("ysb")
    # Side queries at the flow's 1-second pace: at the default 5 s, one late-events batch
    # could span on-time input and the late events, and it then reads all of it.
    spec = load_spec(
        app.default_spec, sets=["side_interval=1s"], overrides=overrides, storage_root=str(root)
    )
    stop = threading.Event()
    pipeline = threading.Thread(
        target=run_pipeline, args=(spark, build_plan(app, spec, Trigger("interval", 1.0)), stop)
    )
    pipeline.start()
    try:
        send(on_time, "on-time")
        lake = table_path(root, "campaign_windows")
        closed = on_time.closed_views(DELAY)
        wait_for(
            lambda: is_table(lake) and lake_views(spark, root) == closed,
            "the closed windows",
            every_s=1,
        )
        send(late, "late")
        late_table = table_path(root, "campaign_windows_late")
        wait_for(
            lambda: late_table.exists() and read_table(spark, late_table).count() >= 40,
            "40 late events",
            every_s=1,
        )
    finally:
        stop.set()
        pipeline.join()

    rows = read_table(spark, late_table).collect()
    assert sorted(r.user_id for r in rows) == sorted(
        json.loads(line)["user_id"] for line in late.lines
    )
    watermark = on_time.last_time - DELAY  # all on-time events were read before
    assert {(r.watermark.replace(tzinfo=UTC), r.windows_dropped) for r in rows} == {(watermark, 1)}
    # The late-events query read only the late events (in one batch or, when they reached
    # the partitions of a topic at different moments, several): the batches of on-time
    # events, whose oldest event the flow saw in time, were skipped without reading them.
    assert sum(read_rows(root, "ysb.campaign_windows.late")) == len(late.lines)


def read_rows(root: Path, query: str) -> list[int]:
    """The rows each batch of ``query`` that read anything read, in batch order."""
    batches = {
        record["batch_id"]: record["input_rows"]
        for record in read_events(root, "ysb")
        if record["event"] == "progress" and record["query"] == query
    }
    return [rows for _, rows in sorted(batches.items()) if rows]


@pytest.mark.parametrize(
    ("long_line", "read"),
    [(0, [0, 0, 0, 0]), (CARRY_CHARS + 1, [0, 0, 0, 2])],
    ids=["rejects-carried-by-the-flow", "a-reject-too-long-to-carry"],
)
def test_quarantine_query_reads_only_batches_the_flow_found_dirty(
    spark: SparkSession, tmp_path: Path, long_line: int, read: list[int]
) -> None:
    data = ysb_data(6_000, rate=200, chunks=3, seed=5, corrupt_fraction=0.0)
    files = write_ysb(data, tmp_path / "input/ysb")
    dirty = tmp_path / "input/ysb/ysb-late-arrival.json"
    broken = "not json at all" + "!" * max(0, long_line - 15)
    dirty.write_bytes(b'{"user_id": "u", "event_type": "vi\n' + broken.encode() + b"\n")
    newest = max(path.stat().st_mtime for path in files)
    os.utime(dirty, (newest + 10, newest + 10))  # read last
    replace_static_table(table_path(tmp_path, "ysb_campaigns"), data.campaigns, CAMPAIGNS_SCHEMA)
    app = get_app("ysb")
    sets = ["sources.ads.max_files_per_trigger=1"]
    spec = load_spec(app.default_spec, sets=sets, storage_root=str(tmp_path))

    run_pipeline(spark, build_plan(app, spec, Trigger("available-now")))

    quarantine = read_table(spark, table_path(tmp_path, "campaign_windows_quarantine"))
    assert sorted(r.raw for r in quarantine.collect()) == [
        broken,
        '{"user_id": "u", "event_type": "vi',
    ]
    assert lake_views(spark, tmp_path) == data.closed_views(DELAY)
    batches = {
        record["batch_id"]: record
        for record in read_events(tmp_path, "ysb")
        if record["event"] == "progress" and record["query"] == "ysb.campaign_windows.quarantine"
    }
    # The three clean files were never read by the quarantine query. The dirty one was
    # read again only when a reject was too long for the flow's report to carry.
    assert [batches[b]["input_rows"] for b in sorted(batches)] == read
    assert [batches[b]["quarantined"] for b in sorted(batches)] == [0, 0, 0, 2]


def test_kafka_quarantine_query_reads_only_batches_the_flow_found_dirty(
    spark: SparkSession, tmp_path: Path, broker: EmbeddedBroker, produce: Produce
) -> None:
    data = ysb_data(6_000, rate=200, chunks=1, seed=5)
    broken = [b'{"user_id": "u", "event_type": "vi', b"not json at all"]
    broker.create_topic("ysb-dirty-end", partitions=3)
    produce("ysb-dirty-end", [*data.lines, *broken])  # round-robin: 2,001 + 2,001 + 2,000
    replace_static_table(table_path(tmp_path, "ysb_campaigns"), data.campaigns, CAMPAIGNS_SCHEMA)
    app = get_app("ysb")
    spec = load_spec(
        app.default_spec,
        sets=["sources.ads.options.maxOffsetsPerTrigger=1500"],
        overrides=kafka_overrides(broker.bootstrap, "ysb-dirty-end"),
        storage_root=str(tmp_path),
    )

    run_pipeline(spark, build_plan(app, spec, Trigger("available-now")))

    quarantine = read_table(spark, table_path(tmp_path, "campaign_windows_quarantine"))
    assert sorted(r.raw for r in quarantine.collect()) == sorted(b.decode() for b in broken)
    assert lake_views(spark, tmp_path) == data.closed_views(DELAY)
    # Batches of 1,500 records: only those holding a broken record were read again.
    read = read_rows(tmp_path, "ysb.campaign_windows.quarantine")
    assert 2 <= sum(read) <= 2 * 1_500, read
