"""The ``foreach_batch`` sink: each micro-batch handed to the user's own function.

``function`` names it as ``package.module:function``; it is called as
``function(batch_df, batch_id, **options)`` on the driver.

**The idempotency contract.** Spark replays a micro-batch whose commit it did not record
(a crash, a restart), with the same ``batch_id`` and the same rows. The function must
make a second call with the same ``batch_id`` change nothing: upsert by key, or record
the batch ids it has written in the same transaction as the rows (as streamsmith's
PostgreSQL sink does), or write files named after the batch id and replace them. A
function that skips a batch it has already written must still consume ``batch_df``
(e.g. ``batch_df.write.format("noop").mode("overwrite").save()``): Spark 4.3 fails a
stateful query's commit otherwise. An exception fails the batch; the supervisor
restarts the query from its checkpoint, so the batch is retried.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import Field
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from streamsmith.config import ConfValue
from streamsmith.io.sinks.base import (
    ALL_MODES,
    QueryArgs,
    Sink,
    SinkContext,
    SinkOptions,
    UpgradeRules,
    start_batches,
)
from streamsmith.loading import load_callable


class ForeachBatchOptions(SinkOptions):
    """``function``: ``package.module:function`` taking ``(batch_df, batch_id)``;
    ``options``: keyword arguments passed to it as well."""

    function: str
    options: dict[str, ConfValue] = Field(default_factory=dict)


class ForeachBatchSink(Sink):
    """The user's function, called once per micro-batch (again on a replay)."""

    format: ClassVar[str] = "foreach_batch"
    kind: ClassVar[str] = "foreach_batch"
    Options = ForeachBatchOptions
    output_modes = ALL_MODES
    upgrade = UpgradeRules("foreach")
    options: ForeachBatchOptions

    def __init__(self, options: ForeachBatchOptions, context: SinkContext) -> None:
        super().__init__(options, context)
        # Resolved when the plan is built: a wrong name fails before Spark starts.
        self.function: Callable[..., Any] = load_callable(
            options.function,
            ".".join((*context.key, "function")),
            search=context.search_path,
            arguments=(None, 0),
            keywords=dict(options.options),
        )

    @property
    def target(self) -> str:
        return self.options.function

    def describe(self) -> str:
        return f"foreach_batch {self.options.function}(batch_df, batch_id)"

    def start(self, spark: SparkSession, frame: DataFrame, query: QueryArgs) -> StreamingQuery:
        function, keywords = self.function, dict(self.options.options)

        def write(batch: DataFrame, batch_id: int) -> None:
            function(batch, batch_id, **keywords)

        return start_batches(frame, write, query)


SINK = ForeachBatchSink
