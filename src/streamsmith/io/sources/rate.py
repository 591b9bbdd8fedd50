"""Spark's ``rate`` source: ``timestamp`` and ``value`` rows made at a fixed rate, for
trying out and load-testing a flow without input data (``options``: ``rowsPerSecond``,
``numPartitions``, ``rampUpTime``). It only streams: rows exist as time passes, so a
backfill has nothing to read."""

from __future__ import annotations

from typing import ClassVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from streamsmith.errors import UserError
from streamsmith.io.sources.base import Source
from streamsmith.transforms.quarantine import POSITION, RAW, READ_ERROR, SOURCE_FILE

_OPTIONS = {"rowspersecond": "rowsPerSecond", "numpartitions": "numPartitions",
            "rampuptime": "rampUpTime"}  # fmt: skip


class RateSource(Source):
    """Rows ``(timestamp, value)``, ``value`` counting up from 0."""

    formats: ClassVar[tuple[str, ...]] = ("rate",)

    def check(self, name: str) -> None:
        unknown = sorted(key for key in self.spec.options if key.lower() not in _OPTIONS)
        if unknown:
            raise UserError(
                f"sources.{name}.options: a rate source has no option(s) {', '.join(unknown)} "
                f"(its options: {', '.join(_OPTIONS.values())})"
            )

    def read(self, spark: SparkSession, schema: StructType | None, *, streaming: bool) -> DataFrame:
        if not streaming:
            raise UserError(
                "a rate source makes rows as time passes and has no batch form: backfill "
                "reads files or Kafka"
            )
        reader = spark.readStream.format("rate")
        for key, value in self.spec.options.items():
            reader = reader.option(_OPTIONS[key.lower()], str(value))
        frame = reader.load()
        return frame.select(
            "timestamp",
            "value",
            F.lit("rate").alias(SOURCE_FILE),
            F.col("value").cast("string").alias(POSITION),
            F.to_json(F.struct("timestamp", "value")).alias(RAW),
            F.lit(None).cast("string").alias(READ_ERROR),
        )

    def describe(self) -> str:
        options = ", ".join(f"{k}={v}" for k, v in sorted(self.spec.options.items()))
        return f"rate ({options or 'rowsPerSecond=1'})"

    def identity(self) -> str:
        return "rate"


SOURCE = RateSource
