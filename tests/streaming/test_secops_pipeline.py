"""The security platform end to end: generated traffic with injected incidents, fed one
time slice at a time to every flow, then checked against the generator's ground truth
(counts, DHCP attribution, alerts) and against a batch backfill of the same input."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from streamsmith.apps import get_app
from streamsmith.config import Trigger, load_spec
from streamsmith.generate.secops import SOURCES, SecopsData, secops_data
from streamsmith.io.lake import backfill_path, read_table, replace_static_table, table_path
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import backfill, start_queries
from streamsmith.schemas.security import ASSETS_SCHEMA


def write_chunk(root: Path, data: SecopsData, number: int) -> None:
    for source in ("dhcp", "flows", "auth"):
        folder = root / "input" / "secops" / source
        staging = folder / f".{number:05d}.tmp"
        staging.write_bytes(b"".join(line + b"\n" for line in data.chunks[source][number]))
        staging.replace(folder / f"secops-{source}-{number:05d}.json")


def test_the_platform_structures_attributes_and_alerts_exactly(
    spark: SparkSession, tmp_path: Path
) -> None:
    data = secops_data(devices=20, chunks=6, seed=1, corrupt_fraction=0.02)
    assets = table_path(tmp_path, "assets")
    replace_static_table(assets, data.assets, ASSETS_SCHEMA)
    app = get_app("secops")
    spec = load_spec(app.default_spec, storage_root=str(tmp_path))
    plan = build_plan(app, spec, Trigger("interval", 0.0))
    for source in SOURCES:
        (tmp_path / "input" / "secops" / source).mkdir(parents=True)
    queries = [query for _, query in start_queries(spark, plan)]
    ws03 = data.assets[3][0]
    try:
        for number in range(6):
            if number == 3:  # the inventory changes while the stream runs
                changed = [(*row[:2], "user-03b", *row[3:]) if row[0] == ws03 else row
                           for row in data.assets]  # fmt: skip
                replace_static_table(assets, changed, ASSETS_SCHEMA)
            write_chunk(tmp_path, data, number)
            for query in queries:
                query.processAllAvailable()
    finally:
        for query in queries:
            query.stop()

    # Structured logs: every event in its table, every corrupt line in quarantine.
    for source, table in zip(SOURCES, ("auth_logs", "dhcp_logs", "flow_logs"), strict=True):
        assert read_table(spark, table_path(tmp_path, table)).count() == data.events[source]
        quarantine = read_table(spark, table_path(tmp_path, f"{table}_quarantine"))
        assert quarantine.count() == data.corrupt[source] > 0

    # Attribution: each login once, with the device holding its IP at that moment.
    devices = read_table(spark, table_path(tmp_path, "auth_devices"))
    rows = devices.select("event_id", "mac", "owner", "event_time").collect()
    assert len(rows) == len({r.event_id for r in rows}) == data.events["auth"]
    assert {r.event_id: r.mac for r in rows} == data.holders
    for row in rows:
        if row.mac == ws03:  # owners come from the inventory as the batch saw it
            late = row.event_time.hour >= 9  # chunk 3 starts at 09:00
            assert row.owner == ("user-03b" if late else "user-03"), row

    # Alerts: every injected incident a rule covers, once; nothing else.
    alerts = read_table(spark, table_path(tmp_path, "alerts")).collect()
    raised = sorted((a.rule, a.entity) for a in alerts)
    expected = sorted((i.rule, i.entity) for i in data.incidents if i.rule != "anomaly")
    true_positives = len(set(raised) & set(expected))
    precision, recall = true_positives / len(raised), true_positives / len(expected)
    print(f"alerts: precision {precision:.2f}, recall {recall:.2f} over {len(expected)} incidents")
    assert raised == expected
    assert len({a.alert_id for a in alerts}) == len(alerts)

    # The same code as a batch job over the same input: the same alerts, ids included.
    backfill(spark, build_plan(app, spec, Trigger("available-now")))
    batch_alerts = spark.read.parquet(str(backfill_path(tmp_path, "alerts"))).collect()
    assert sorted(a.alert_id for a in batch_alerts) == sorted(a.alert_id for a in alerts)
    batch_devices = spark.read.parquet(str(backfill_path(tmp_path, "auth_devices")))
    assert {r.event_id: r.mac for r in batch_devices.collect()} == data.holders
