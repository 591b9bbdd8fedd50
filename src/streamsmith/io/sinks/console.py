"""The console sink: each micro-batch printed on the driver's standard output.

For trying a flow out (``streamsmith run my_pipeline --set flows.f.sink.format=console``);
nothing is kept, so nothing is exactly once: a replayed batch is printed again.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from streamsmith.io.sinks.base import ALL_MODES, QueryArgs, Sink, SinkOptions, UpgradeRules


class ConsoleOptions(SinkOptions):
    """``num_rows``: rows printed per batch; ``truncate``: cut long values to 20 chars."""

    num_rows: int = Field(default=20, gt=0)
    truncate: bool = True


class ConsoleSink(Sink):
    """Spark's console sink: prints, keeps nothing."""

    format: ClassVar[str] = "console"
    kind: ClassVar[str] = "console"
    Options = ConsoleOptions
    output_modes = ALL_MODES
    upgrade = UpgradeRules("rebuilt")
    options: ConsoleOptions

    @property
    def target(self) -> str:
        return f"console of flow {self.context.flow}"

    def describe(self) -> str:
        shown = "truncated" if self.options.truncate else "in full"
        return f"console (standard output, {self.options.num_rows} rows a batch, {shown})"

    def start(self, spark: SparkSession, frame: DataFrame, query: QueryArgs) -> StreamingQuery:
        return (
            frame.writeStream.queryName(query.name)
            .format("console")
            .outputMode(query.output_mode)
            .option("numRows", str(self.options.num_rows))
            .option("truncate", str(self.options.truncate).lower())
            .option("checkpointLocation", str(query.checkpoint))
            .trigger(**query.trigger.spark_kwargs())
            .start()
        )


SINK = ConsoleSink
