"""The Yahoo Streaming Benchmark app against the generator's ground truth: from files
(with the PostgreSQL flow) and from Kafka with the JSON decoded at the source."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from pyspark.sql import SparkSession

from streamsmith.apps import get_app
from streamsmith.apps.ysb import kafka_sets
from streamsmith.config import Trigger, load_spec
from streamsmith.generate import produce_all
from streamsmith.generate.ysb import YsbData, write_ysb, ysb_data
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.lake import is_table, read_table, replace_static_table, table_path
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import run_pipeline
from streamsmith.schemas.ysb import CAMPAIGNS_SCHEMA

DELAY = timedelta(seconds=10)


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


def test_views_from_kafka_with_json_decoded_at_the_source(
    spark: SparkSession, tmp_path: Path, broker: EmbeddedBroker
) -> None:
    data = generated(10_000, rate=200)  # 50 s: three windows close
    broker.create_topic("ysb-ads", partitions=3)
    lines = data.lines
    produce_all(broker.bootstrap, "ysb-ads", lines, [None] * len(lines))
    replace_static_table(table_path(tmp_path, "ysb_campaigns"), data.campaigns, CAMPAIGNS_SCHEMA)
    app = get_app("ysb")
    sets = kafka_sets(broker.bootstrap, "ysb-ads")
    spec = load_spec(app.default_spec, sets=sets, storage_root=str(tmp_path))

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
    on_time = ysb_data(2_000, rate=50, chunks=1, seed=5)  # 40 s of event time
    late = ysb_data(40, rate=100, chunks=1, seed=6, start=on_time.first_time + timedelta(seconds=5))
    broker.create_topic("ysb-live", partitions=3)
    replace_static_table(table_path(tmp_path, "ysb_campaigns"), on_time.campaigns, CAMPAIGNS_SCHEMA)
    app = get_app("ysb")
    sets = kafka_sets(broker.bootstrap, "ysb-live")
    spec = load_spec(app.default_spec, sets=sets, storage_root=str(tmp_path))
    stop = threading.Event()
    pipeline = threading.Thread(
        target=run_pipeline, args=(spark, build_plan(app, spec, Trigger("interval", 1.0)), stop)
    )
    pipeline.start()
    try:
        produce_all(broker.bootstrap, "ysb-live", on_time.lines, [None] * len(on_time.lines))
        lake = table_path(tmp_path, "campaign_windows")
        closed = on_time.closed_views(DELAY)
        wait_for(lambda: is_table(lake) and lake_views(spark, tmp_path) == closed)
        produce_all(broker.bootstrap, "ysb-live", late.lines, [None] * len(late.lines))
        late_table = table_path(tmp_path, "campaign_windows_late")
        wait_for(lambda: late_table.exists() and read_table(spark, late_table).count() >= 40)
    finally:
        stop.set()
        pipeline.join()

    rows = read_table(spark, late_table).collect()
    assert sorted(r.user_id for r in rows) == sorted(
        json.loads(line)["user_id"] for line in late.lines
    )
    watermark = on_time.last_time - DELAY  # all on-time events were read before
    assert {(r.watermark.replace(tzinfo=UTC), r.windows_dropped) for r in rows} == {(watermark, 1)}
    assert "never read the same input" not in caplog.text


def wait_for(condition: Callable[[], bool], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(1)
