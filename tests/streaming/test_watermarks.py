"""The seeds' watermark walk-throughs as real queries, one micro-batch per chunk of input.

Each chunk is a file; ``processAllAvailable`` runs it as one micro-batch, so the
watermark moves exactly as in the seeds' diagrams: it is the largest event time seen in
earlier batches minus the delay.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from streamsmith.apps.signals import signal_windows
from streamsmith.config import Trigger, load_spec
from streamsmith.io.lake import read_table, table_path
from streamsmith.runtime.app import App, EventTime, FlowDefinition
from streamsmith.runtime.outputs import Output
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.start import start_queries
from streamsmith.schemas.iot import SIGNAL_SCHEMA
from streamsmith.transforms.signals import signal_events


def seeds_app(window: str, slide: str | None) -> App:
    """Signals counted per device and window, watermark 10 minutes, into memory."""
    return App(
        name="seeds",
        description="the seeds' watermark example",
        flows=(
            FlowDefinition(
                name="counts",
                prepare=signal_events,
                transform=signal_windows,  # applies the rule below itself
                record_schema=SIGNAL_SCHEMA,
                event_time=EventTime("eventTime", "10 minutes", window, slide),
                stateful=True,
            ),
        ),
        default_spec={
            "app": "seeds",
            "sources": {
                "signals": {"format": "jsonl", "path": "input", "max_files_per_trigger": 1}
            },
            "flows": {
                "counts": {
                    "source": "signals",
                    "sink": {"format": "memory", "table": "seed_counts", "output_mode": "update"},
                }
            },
        },
    )


class ChunkFeeder:
    """Writes one file per chunk and runs every query over it as one micro-batch."""

    def __init__(self, inbox: Path, queries: Sequence[tuple[Output, StreamingQuery]]) -> None:
        self.inbox = inbox
        self.queries = queries
        self.chunks = 0

    def feed(self, *events: tuple[str, str]) -> None:
        lines = [
            json.dumps({"eventTime": f"2026-11-20T{hhmm}:00Z", "deviceId": device, "signal": 1.0})
            for hhmm, device in events
        ]
        staging = self.inbox / f".chunk-{self.chunks:03d}.json"
        staging.write_text("\n".join(lines) + "\n", encoding="utf-8")
        staging.replace(self.inbox / f"chunk-{self.chunks:03d}.json")
        self.chunks += 1
        for _, query in self.queries:
            query.processAllAvailable()

    def query(self, kind: str) -> StreamingQuery:
        return next(query for output, query in self.queries if output.kind == kind)


@pytest.fixture
def feeder(
    spark: SparkSession, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[ChunkFeeder]:
    window, slide = request.param
    app = seeds_app(window, slide)
    plan = build_plan(
        app,
        load_spec(app.default_spec, storage_root=str(tmp_path)),
        Trigger("interval", 0.0),
    )
    (tmp_path / "input").mkdir()
    queries = start_queries(spark, plan)
    try:
        yield ChunkFeeder(tmp_path / "input", queries)
    finally:
        for _, query in queries:
            query.stop()


def counts(spark: SparkSession) -> dict[tuple[str, str], int]:
    """The latest count per (window start HH:MM, device) in the update-mode memory table."""
    rows = spark.sql(
        "SELECT date_format(window_start, 'HH:mm') AS start, deviceId, max(events) AS n "
        "FROM seed_counts GROUP BY 1, 2"
    ).collect()
    return {(row.start, row.deviceId): row.n for row in rows}


@pytest.mark.parametrize("feeder", [("5 minutes", None)], indirect=True)
def test_tumbling_windows_count_late_events_and_drop_those_behind_the_watermark(
    spark: SparkSession, feeder: ChunkFeeder, tmp_path: Path
) -> None:
    feeder.feed(("11:52", "dev1"), ("12:02", "dev1"), ("12:07", "dev1"), ("12:14", "dev2"))
    # The watermark is now 12:14 - 10 min = 12:04.
    feeder.feed(("12:08", "dev1"), ("12:03", "dev3"), ("11:58", "dev4"))

    assert counts(spark) == {
        ("11:50", "dev1"): 1,
        ("12:00", "dev1"): 1,
        ("12:00", "dev3"): 1,  # 12:03 is before the watermark, but its window ends at 12:05
        ("12:05", "dev1"): 2,  # the late 12:08 updates the old window
        ("12:10", "dev2"): 1,
    }  # 11:58's window [11:55, 12:00) ended before 12:04: dropped
    progress = feeder.query("memory").lastProgress
    assert progress is not None
    assert progress["eventTime"]["watermark"] == "2026-11-20T12:04:00.000Z"
    # The state keeps only windows ending after 12:04: [11:50, 11:55) is gone.
    assert progress["stateOperators"][0]["numRowsTotal"] == 4

    late = read_table(spark, table_path(tmp_path, "seed_counts_late")).collect()
    assert [(row.deviceId, row.windows_dropped, row.batch_id) for row in late] == [("dev4", 1, 1)]
    assert late[0].watermark.isoformat().startswith("2026-11-20T12:04")


@pytest.mark.parametrize("feeder", [("10 minutes", "5 minutes")], indirect=True)
def test_late_record_updates_the_old_sliding_window(
    spark: SparkSession, feeder: ChunkFeeder, tmp_path: Path
) -> None:
    feeder.feed(("12:07", "dev1"), ("12:08", "dev2"))
    feeder.feed(("12:14", "dev1"), ("12:09", "dev3"))
    before = counts(spark)
    feeder.feed(("12:04", "dev2"))  # late: the watermark is 12:04, its windows end later

    after = counts(spark)
    assert before[("12:00", "dev2")] == 1
    assert after[("12:00", "dev2")] == 2
    assert after[("11:55", "dev2")] == 1
    assert not read_table(spark, table_path(tmp_path, "seed_counts_late")).count()
