"""YSB with the app's guarantees written by hand, for ``ysb.py``: the fair baseline and the
one-query-per-flow design.

*The fair baseline* is what a careful engineer writes in plain Spark for the app's
outputs: the same windowed count over the accepted events, and every rejected line
(malformed, a required field missing, an unknown event type: the app's checks) in a
second table with its raw payload, both Delta tables as the app's are. A stateful
windowed count cannot run inside ``foreachBatch`` without keeping its state by hand, so
they write two queries over the same input, each with Delta Lake's streaming sink:
exactly-once by its transaction marks, no code of their own to get wrong. Each query
reads and parses the input itself.

*One query per flow* is the design issue 24 asks to measure, done the streamsmith way
(the app's own source, parser and transform) but as one ``foreachBatch`` query: each
micro-batch is read and parsed once, cached, and writes the quarantine, the late events
and the closed windows, exactly-once by batch id. The window state is kept by hand (a
small JSON file per batch: the open windows' counts and the watermark), which is the
price of the design: Spark's state store cannot serve a ``foreachBatch`` writer.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from _common import bare_windows, kafka_records, table_query
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import StringType, StructField, StructType

from streamsmith.io.lake import replace_batch_files
from streamsmith.runtime.plan import FlowPlan
from streamsmith.schemas.ysb import AD_EVENT_SCHEMA, EVENT_TYPES
from streamsmith.transforms.quarantine import (
    POSITION,
    QUARANTINE_PARTITION_BY,
    RAW,
    REJECT_REASON,
    SOURCE_FILE,
    quarantined,
)
from streamsmith.transforms.ysb import TIME, campaign_views

REQUIRED = (TIME, "ad_id", "event_type")
DELAY_US = 10_000_000  # the app's watermark delay and window, in µs
WINDOW_US = 10_000_000
_CORRUPT = "_corrupt_record"


def reject_reason(malformed: Column) -> Column:
    """Why an ad event is rejected (null: accepted): the app's checks, by hand."""
    return F.coalesce(
        F.when(malformed, F.lit("malformed JSON")),
        *(F.when(F.col(name).isNull(), F.lit(f"missing or invalid {name}")) for name in REQUIRED),
        F.when(~F.col("event_type").isin(*EVENT_TYPES), F.lit("unknown event_type")),
    )


def checked_files(spark: SparkSession, folder: str) -> DataFrame:
    """The JSON-lines files read ``PERMISSIVE``, each line with its reject reason, file and
    raw payload (the line when malformed, else the parsed row as JSON: Spark's JSON reader
    does not hand out the line of a row it parsed; the app reads the lines as text and
    parses them with ``from_json`` to keep each one)."""
    schema = StructType([*AD_EVENT_SCHEMA.fields, StructField(_CORRUPT, StringType())])
    lines = (
        spark.readStream.schema(schema)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", _CORRUPT)
        .json(folder)
    )
    data = [F.col(name) for name in AD_EVENT_SCHEMA.fieldNames()]
    return lines.select(
        *data,
        reject_reason(F.col(_CORRUPT).isNotNull()).alias("reason"),
        F.col("_metadata.file_path").alias("source"),
        F.lit(None).cast("string").alias("position"),
        F.coalesce(F.col(_CORRUPT), F.to_json(F.struct(*data))).alias("raw"),
    )


def checked_kafka(
    spark: SparkSession, bootstrap: str, topic: str, *, connector: str = "python"
) -> DataFrame:
    """The topic through a Kafka connector (streamsmith's or Spark's), ``from_json`` over
    each value; a value that is not JSON parses to nulls, so the required-field checks
    reject it."""
    records = kafka_records(spark, bootstrap, topic, connector=connector)
    value = F.col("value").cast("string")
    parsed = records.select(
        F.from_json(value, AD_EVENT_SCHEMA).alias("event"),
        F.format_string("kafka://%s/%d", "topic", "partition").alias("source"),
        F.col("offset").cast("string").alias("position"),
        value.alias("raw"),
    )
    return parsed.select("event.*", "source", "position", "raw").withColumn(
        "reason", reject_reason(F.lit(False))
    )


def start_fair_baseline(
    checked: DataFrame, campaigns: DataFrame, out: Path
) -> dict[str, StreamingQuery]:
    """The two queries: the accepted events' windows to ``out/table``, the rejects with
    their payload to ``out/rejects/table``; each reads ``checked`` itself."""
    accepted = checked.where(F.col("reason").isNull())
    rejects = checked.where(F.col("reason").isNotNull())
    return {
        "main": table_query(bare_windows(accepted, campaigns), out, "delta"),
        "rejects": table_query(
            rejects.select("reason", "source", "position", "raw"), out / "rejects", "delta"
        ),
    }


@dataclass(frozen=True)
class OneQueryFlow:
    """The ysb flow as one ``foreachBatch`` query writing, under ``out``, ``table`` (closed
    windows), ``quarantine`` and ``late``, and keeping its window state in ``state``."""

    flow: FlowPlan
    campaigns: DataFrame
    out: Path
    # (step, milliseconds) of each batch's steps, for the benchmark's report.
    steps: list[tuple[str, int]] = field(default_factory=list)

    def start(self, spark: SparkSession) -> StreamingQuery:
        """From scratch: the flow's source read and parsed as the app does, then
        :meth:`write` per micro-batch."""
        shutil.rmtree(self.out, ignore_errors=True)
        (self.out / "state").mkdir(parents=True)
        prepare = self.flow.definition.prepare
        assert prepare is not None  # the ysb flow parses with ad_events
        tagged = prepare(self.flow.input.read(spark, AD_EVENT_SCHEMA, streaming=True))
        return (
            tagged.writeStream.queryName("ysb-one-query")
            .foreachBatch(self.write)
            .option("checkpointLocation", str(self.out / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )

    def write(self, batch: DataFrame, batch_id: int) -> None:
        """One micro-batch: read and parsed once (cached), then every output; a replay of
        ``batch_id`` rewrites the same files from the state of ``batch_id - 1``."""
        rejected = F.col(REJECT_REASON).isNotNull()
        # Lineage and payload of the rejects only: the cache is the design's cost.
        lineage = [c for c in (SOURCE_FILE, POSITION, RAW) if c in batch.columns]
        kept = [F.when(rejected, F.col(c)).alias(c) for c in lineage]
        cached = batch.select("ad_id", "event_type", TIME, REJECT_REASON, *kept).persist()
        lap = _Lap(self.steps)
        try:
            stats = cached.agg(
                F.count_if(rejected).alias("rejects"),
                F.min(F.when(~rejected, F.unix_micros(TIME))).alias("oldest"),
                F.max(F.when(~rejected, F.unix_micros(TIME))).alias("newest"),
            ).first()
            assert stats is not None
            lap("read, parse, cache")
            if stats["rejects"]:
                replace_batch_files(
                    quarantined(cached), self.out / "quarantine", batch_id, QUARANTINE_PARTITION_BY
                )
                lap("quarantine")
            watermark, open_windows = self._state(batch_id - 1)
            on_time = cached.where(~rejected)
            oldest = stats["oldest"]
            if watermark is not None and oldest is not None and _end(oldest) <= watermark:
                # Spark's rule: an event is late when its window ends at or before the
                # watermark of the batch before; the oldest event says whether any is.
                late = F.unix_micros(TIME) - F.unix_micros(TIME) % WINDOW_US + WINDOW_US
                late_rows = on_time.where(late <= watermark).select("ad_id", "event_type", TIME)
                moment = F.timestamp_micros(F.lit(watermark))
                replace_batch_files(
                    late_rows.withColumn("watermark", moment), self.out / "late", batch_id
                )
                on_time = on_time.where(late > watermark)
                lap("late events")
            counts = campaign_views(on_time.select("ad_id", "event_type", TIME), self.campaigns)
            start = F.unix_micros("window_start").alias("start")
            for campaign, begins, views in counts.select("campaign_id", start, "views").collect():
                open_windows[campaign, begins] = open_windows.get((campaign, begins), 0) + views
        finally:
            cached.unpersist()
        if stats["newest"] is not None:
            moved = stats["newest"] - DELAY_US
            watermark = moved if watermark is None else max(watermark, moved)
        closed = {
            key: views
            for key, views in open_windows.items()
            if watermark is not None and key[1] + WINDOW_US <= watermark
        }
        self._write_closed(batch_id, closed)
        still_open = [
            [c, begins, n] for (c, begins), n in open_windows.items() if (c, begins) not in closed
        ]
        state = self.out / "state" / str(batch_id)
        staged = state.with_suffix(".tmp")
        staged.write_text(
            json.dumps({"watermark": watermark, "open": still_open}), encoding="utf-8"
        )
        staged.replace(state)
        lap("windows")

    def _state(self, batch_id: int) -> tuple[int | None, dict[tuple[str, int], int]]:
        """The watermark (µs) and open windows' counts after ``batch_id``."""
        path = self.out / "state" / str(batch_id)
        if batch_id < 0 or not path.exists():
            return None, {}
        state = json.loads(path.read_text(encoding="utf-8"))
        return state["watermark"], {(c, start): n for c, start, n in state["open"]}

    def _write_closed(self, batch_id: int, closed: dict[tuple[str, int], int]) -> None:
        """The windows the watermark closed in ``batch_id``, as one file named by it."""
        table = self.out / "table"
        table.mkdir(exist_ok=True)
        starts = [start for _, start in closed]
        rows = pa.table(
            {
                "campaign_id": pa.array([c for c, _ in closed], pa.string()),
                "window_start": pa.array(starts, pa.timestamp("us", "UTC")),
                "window_end": pa.array([s + WINDOW_US for s in starts], pa.timestamp("us", "UTC")),
                "views": pa.array(list(closed.values()), pa.int64()),
            }
        )
        staged = table / f".batch-{batch_id}.parquet.tmp"
        pq.write_table(rows, staged)
        staged.replace(table / f"batch-{batch_id}.parquet")


class _Lap:
    """Appends (step, milliseconds since the last step) to a list."""

    def __init__(self, steps: list[tuple[str, int]]) -> None:
        self.steps = steps
        self.last = time.perf_counter()

    def __call__(self, step: str) -> None:
        now = time.perf_counter()
        self.steps.append((step, round((now - self.last) * 1000)))
        self.last = now


def _end(micros: int) -> int:
    """The end (µs) of the window holding an event time (µs)."""
    return micros - micros % WINDOW_US + WINDOW_US


def batch_times(queries: dict[str, StreamingQuery]) -> list[tuple[str, int]]:
    """(query, milliseconds) of every batch each of ``queries`` ran, by the given names."""
    return [
        (name, progress.batchDuration)
        for name, query in queries.items()
        for progress in query.recentProgress
    ]
