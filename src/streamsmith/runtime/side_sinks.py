"""The sinks of a flow's side queries: its quarantine and its late events.

They are sinks like any other (``streamsmith.io.sinks.base``), but the plan adds them to
a flow rather than the spec naming them, and they know the flow's main query: each side
query finds the main query's batches that read its input and skips those the main query
found clean or on time (``streamsmith.runtime.flow_batches``).

Their tables are Delta tables, or Parquet ones beside a flow writing Parquet (and where
an earlier version left a Parquet table: a lake keeps its tables' format).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from streamsmith.io.lake import TableFormat, kept_format
from streamsmith.io.sinks.base import (
    LakeBackedSink,
    LakeTableOptions,
    QueryArgs,
    SinkContext,
    UpgradeRules,
)
from streamsmith.io.sinks.kafka import DeadLetterSink
from streamsmith.io.sources.base import SourceKind
from streamsmith.monitor.progress import QUARANTINE_METRIC
from streamsmith.runtime.app import EventTime
from streamsmith.runtime.clean_input import (
    can_skip_clean_input,
    start_following_quarantine,
    start_quarantine_stream,
)
from streamsmith.runtime.flow_batches import (
    FlowCover,
    FlowFacts,
    recomputed_after_main,
    running_here,
    uncommitted_batch,
)
from streamsmith.runtime.late import BATCH_COLUMN, create_late_table, start_late_stream
from streamsmith.transforms.quarantine import POSITION, QUARANTINE_PARTITION_BY, SOURCE_FILE


@dataclass(frozen=True)
class MainQuery:
    """What a side query knows of its flow's main query.

    ``source`` says how to find the main query's batches that read a side batch's input
    (by file, or by Kafka offset); None when the flow reads several sources.
    """

    checkpoint: Path
    spark_name: str
    source: SourceKind | None
    prepared: bool  # the flow parses its input in a prepare stage that tags rejects

    def cover(self, spark: SparkSession, own: Path) -> FlowCover:
        """Which of this query's batches read the input of a side query's (checkpoint
        ``own``) batches; for a flow reading one source (``source`` is not None)."""
        assert self.source is not None
        return FlowCover(
            self.source, self.checkpoint, own, alive=running_here(spark, self.spark_name)
        )


class _SideSink(LakeBackedSink):
    upgrade = UpgradeRules("file", keeps_schema=True, fixed_location=True)

    def __init__(
        self, table: str, context: SinkContext, main: MainQuery, table_format: TableFormat
    ) -> None:
        super().__init__(LakeTableOptions(table=table), context)
        self.main = main
        self._format = table_format  # the flow's own table's, or delta

    @property
    def table_format(self) -> TableFormat:
        return kept_format(self.lake_path, self._format)


def side_notes(sink: object, checkpoint: Path) -> list[str]:
    """What ``check-upgrade`` and ``run`` say of a side query (checkpoint ``checkpoint``)
    whose counts may not reconcile with its flow's: a batch it computes again after the
    flow committed it, or batches it does not line up with the flow's."""
    if not isinstance(sink, _SideSink):
        return []
    notes = []
    again = recomputed_after_main(sink.main.checkpoint, checkpoint)
    if again is not None:
        notes.append(again)
    pending = uncommitted_batch(checkpoint)
    if pending is not None and isinstance(sink, QuarantineSink) and not sink.follows_main:
        notes.append(
            f"its batch {pending} is computed again on its own, not lined up with the "
            "flow's (several sources, or a Parquet quarantine kept by Spark's file sink): "
            "if the spec changed which records are rejected, read = written + quarantined "
            "may not hold for it"
        )
    return notes


class QuarantineSink(_SideSink):
    """Rejected rows with their raw payload and reason, partitioned by reason's date."""

    format: ClassVar[str] = "quarantine"
    kind: ClassVar[str] = "quarantine"

    @property
    def partition_by(self) -> tuple[str, ...]:
        return QUARANTINE_PARTITION_BY

    @property
    def follows_main(self) -> bool:
        """Whether each batch waits for the flow's main query to commit its input
        (``FlowCover.parts``); else Spark's file sink writes it on its own schedule."""
        main = self.main
        return (
            main.source is not None
            and main.prepared
            and can_skip_clean_input(self.lake_path, self.table_format, single_input=True)
        )

    def start(self, spark: SparkSession, frame: DataFrame, query: QueryArgs) -> StreamingQuery:
        """Skipping what the flow's main query found clean where it can tell
        (``streamsmith.runtime.clean_input``), else Spark's file sink."""
        main = self.main
        table_format = self.table_format
        if self.follows_main and main.source is not None:
            return start_quarantine_stream(
                frame,
                name=query.name,
                path=self.lake_path,
                checkpoint=query.checkpoint,
                trigger=query.trigger,
                partition_by=self.partition_by,
                cover=main.cover(spark, query.checkpoint),
                facts=FlowFacts(spark, main.spark_name),
                table_format=table_format,
                app_id=self.app_id(query),
            )
        frame = frame.observe(QUARANTINE_METRIC, F.count(F.lit(1)).alias("rows"))
        return self.start_file_sink(frame, query)  # side queries run in append mode


class DeadLetterQuarantine(DeadLetterSink):
    """A real-time flow's quarantine: its rejected records to the sink's dead-letter
    topic. It follows the flow's query as :class:`QuarantineSink` does: each of its
    batches waits until the flow's query has committed that input (a real-time batch
    commits at the end of its checkpoint interval), and reads nothing when the flow's
    query rejected nothing there; so a clean stream is parsed once, not twice."""

    def __init__(self, letters: DeadLetterSink, main: MainQuery) -> None:
        super().__init__(letters.options, letters.context)
        self.main = main

    def start(self, spark: SparkSession, frame: DataFrame, query: QueryArgs) -> StreamingQuery:
        main = self.main
        if main.source is None or not main.prepared:  # the flow's query cannot tell
            return super().start(spark, frame, query)

        def write_rows(batch: DataFrame, _batch_id: int) -> int:
            return self.append(batch)

        return start_following_quarantine(
            frame,
            name=query.name,
            checkpoint=query.checkpoint,
            trigger=query.trigger,
            cover=main.cover(spark, query.checkpoint),
            facts=FlowFacts(spark, main.spark_name),
            write_rows=write_rows,
        )


class LateEventsSink(_SideSink):
    """Events the flow's watermark dropped, with the watermark that dropped them."""

    format: ClassVar[str] = "late"
    kind: ClassVar[str] = "late"
    upgrade = UpgradeRules("foreach", fixed_location=True)

    def __init__(
        self,
        table: str,
        context: SinkContext,
        main: MainQuery,
        table_format: TableFormat,
        rule: EventTime,
    ) -> None:
        super().__init__(table, context, main, table_format)
        self.rule = rule

    @property
    def partition_by(self) -> tuple[str, ...]:
        return (BATCH_COLUMN,)

    def create(self, spark: SparkSession, frame: DataFrame, at: Path | None = None) -> bool:
        """The table, empty, for a run whose late-events query had nothing to do and did
        not start (``runtime.supervisor``): readers find it as after any run."""
        create_late_table(frame, at or self.lake_path, self.table_format)
        return True

    def start(self, spark: SparkSession, frame: DataFrame, query: QueryArgs) -> StreamingQuery:
        """Each event gets the watermark of the flow's batch that read it, when the
        frame still says where each row came from."""
        source = self.main.source
        needed = {"files": {SOURCE_FILE}, "kafka": {SOURCE_FILE, POSITION}}
        if source is not None and not needed[source] <= set(frame.columns):
            source = None
        return start_late_stream(
            frame,
            self.rule,
            name=query.name,
            path=self.lake_path,
            checkpoint=query.checkpoint,
            trigger=query.trigger,
            flow_checkpoint=self.main.checkpoint,
            flow_alive=running_here(spark, self.main.spark_name),
            source=source,
            facts=FlowFacts(spark, self.main.spark_name) if source else None,
            table_format=self.table_format,
            app_id=self.app_id(query),
        )
