"""The Yahoo Streaming Benchmark app against the generator's ground truth: from files
(with the PostgreSQL flow) and from Kafka with the JSON decoded at the source."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from pyspark.sql import SparkSession

from streamsmith.apps import get_app
from streamsmith.config import Trigger, load_spec
from streamsmith.generate import produce_all
from streamsmith.generate.ysb import YsbData, write_ysb, ysb_data
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.lake import read_table, replace_static_table, table_path
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
    sets = [
        f"kafka.bootstrap_servers={broker.bootstrap}",
        "sources.ads.format=kafka",
        "sources.ads.path=null",
        "sources.ads.options.subscribe=ysb-ads",
        "sources.ads.options.startingOffsets=earliest",
        "sources.ads.options.valueFormat=json",
    ]
    spec = load_spec(app.default_spec, sets=sets, storage_root=str(tmp_path))

    run_pipeline(spark, build_plan(app, spec, Trigger("available-now")))

    # Three partitions are read in any interleaving: the watermark is the newest event
    # seen, so the same windows close as from the files.
    closed = data.closed_views(DELAY)
    assert len({window for _, window in closed}) == 3
    assert lake_views(spark, tmp_path) == closed
    quarantine = read_table(spark, table_path(tmp_path, "campaign_windows_quarantine"))
    assert quarantine.count() == data.corrupt
