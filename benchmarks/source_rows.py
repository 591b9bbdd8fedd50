"""What Spark pays per row a Python streaming source hands it, by the row's shape.

A Python data source gives Spark Arrow batches, but Spark's streaming reader turns every
row into an ``UnsafeRow`` before any operator sees it, copying every column, used or
not: Spark gives Python sources no column pruning. In a profile of YSB at 10,000
events/s (Java Flight Recorder on the driver, both sinks) that projection was the
JVM's largest single cost. This script isolates it: a stream of prebuilt YSB rows in
several shapes, from a source that only yields the same Arrow batch again, into the
``noop`` sink; the time is Spark's ``addBatch`` for the batch of ``--rows`` rows.

    .venv/bin/python benchmarks/source_rows.py --rows 1000000 --runs 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from streamsmith.config import SparkSpec
from streamsmith.spark.session import build_session

CHUNK = 10_000  # rows per Arrow batch, as the Kafka source yields them
TASKS = 2
RECORD = {
    "user_id": "3f1e2a4b-1c2d-4e5f-8a9b-0c1d2e3f4a5b",
    "page_id": "7a6b5c4d-3e2f-1a0b-9c8d-7e6f5a4b3c2d",
    "ad_id": "1b2c3d4e-5f6a-7b8c-9d0e-1f2a3b4c5d6e",
    "ad_type": "banner",
    "event_type": "view",
    "event_time": "2026-11-24T10:00:00.123000Z",
    "ip_address": "1.2.3.4",
}
FIELDS = ", ".join(f"{name} {'timestamp' if name == 'event_time' else 'string'}" for name in RECORD)
KAFKA = "key binary, value binary, topic string, partition int, offset long, "
KAFKA += "timestamp timestamp, timestampType int"
SHAPES = {  # name: (schema, raw value kept)
    "Kafka columns + json struct (the source)": (
        f"{KAFKA}, json struct<{FIELDS}>, json_error string", True),
    "same, decoded fields flat": (f"{KAFKA}, {FIELDS}, json_error string", True),
    "same as the source, value null": (
        f"{KAFKA}, json struct<{FIELDS}>, json_error string", False),
    "lineage + flat fields, value null": (
        f"value binary, topic string, partition int, offset long, {FIELDS}, json_error string",
        False),
    "the 3 fields YSB reads": ("ad_id string, event_type string, event_time timestamp", True),
    "pruned source, YSB's main query": (
        "json struct<ad_id string, event_type string, event_time timestamp>, json_error string",
        True),
}  # fmt: skip


def _batch(names: list[str], raw: bool, decoded: list[str]) -> pa.RecordBatch:
    """``CHUNK`` copies of the YSB record in the columns ``names``, the ``json`` struct
    holding the fields ``decoded``."""
    stamp = pa.array([1_700_000_000_000_000] * CHUNK, pa.timestamp("us", tz="UTC"))
    fields = {
        name: stamp if name == "event_time" else pa.array([value] * CHUNK)
        for name, value in RECORD.items()
    }
    value = json.dumps(RECORD).encode()
    columns = {
        "key": pa.nulls(CHUNK, pa.binary()),
        "value": pa.array([value] * CHUNK, pa.binary()) if raw else pa.nulls(CHUNK, pa.binary()),
        "topic": pa.array(["ysb"] * CHUNK),
        "partition": pa.array([0] * CHUNK, pa.int32()),
        "offset": pa.array(range(CHUNK), pa.int64()),
        "timestamp": stamp,
        "timestampType": pa.array([0] * CHUNK, pa.int32()),
        "json": pa.StructArray.from_arrays([fields[name] for name in decoded], names=decoded),
        "json_error": pa.nulls(CHUNK, pa.string()),
        **fields,
    }
    return pa.RecordBatch.from_arrays([columns[name] for name in names], names=names)


@dataclass(frozen=True)
class _Task(InputPartition):
    batches: int


class _Reader(DataSourceStreamReader):
    """One micro-batch of ``rows`` rows in ``TASKS`` tasks, then nothing."""

    def __init__(self, names: list[str], raw: bool, rows: int, decoded: list[str]) -> None:
        self.names, self.raw, self.rows, self.decoded = names, raw, rows, decoded

    def initialOffset(self) -> dict[str, int]:
        return {"batch": 0}

    def latestOffset(self) -> dict[str, int]:
        return {"batch": 1}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[_Task]:
        return [_Task(self.rows // CHUNK // TASKS)] * TASKS if end != start else []

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _Task)
        batch = _batch(self.names, self.raw, self.decoded)
        for _ in range(partition.batches):
            yield batch

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to keep."""


class _Shapes(DataSource):
    @classmethod
    def name(cls) -> str:
        return "bench_source_rows"

    def schema(self) -> str:
        return SHAPES[self.options["shape"]][0]

    def streamReader(self, schema):  # type: ignore[no-untyped-def]
        raw = SHAPES[self.options["shape"]][1]
        decoded = schema["json"].dataType.fieldNames() if "json" in schema.fieldNames() else []
        return _Reader(schema.fieldNames(), raw, int(self.options["rows"]), decoded)


def _add_batch_seconds(spark: SparkSession, shape: str, rows: int) -> float:
    with tempfile.TemporaryDirectory(prefix="streamsmith-bench-rows-") as checkpoint:
        frame = spark.readStream.format(_Shapes.name()).option("shape", shape)
        query = (
            frame.option("rows", rows)
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .start()
        )
        try:
            query.processAllAvailable()
            read = [p for p in query.recentProgress if p.numInputRows]
        finally:
            query.stop()
    if [p.numInputRows for p in read] != [rows]:
        raise SystemExit(f"{shape}: read {[p.numInputRows for p in read]} rows, not {rows}")
    return read[0].durationMs["addBatch"] / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5, help="per shape; the first is left out")
    args = parser.parse_args()
    if args.rows % (CHUNK * TASKS):
        raise SystemExit(f"--rows must be a multiple of {CHUNK * TASKS}")
    spark = build_session(SparkSpec(master="local[2]"), "bench-source-rows")
    spark.dataSource.register(_Shapes)
    seconds: dict[str, list[float]] = {shape: [] for shape in SHAPES}
    for _ in range(args.runs):  # round-robin: the JVM keeps compiling hot code for minutes
        for shape in SHAPES:
            seconds[shape].append(_add_batch_seconds(spark, shape, args.rows))
    print(f"{args.rows:,} rows per batch in {TASKS} tasks into the noop sink; addBatch, "
          f"median of runs 2..{args.runs}")  # fmt: skip
    print(f"{'row shape':<44}{'columns':>8}{'seconds':>9}{'µs/row':>8}")
    for shape, (schema, _) in SHAPES.items():
        median = statistics.median(seconds[shape][1:])
        columns = len(spark.createDataFrame([], schema).schema.fields)
        print(f"{shape:<44}{columns:>8}{median:>9.2f}{median * 1e6 / args.rows:>8.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
