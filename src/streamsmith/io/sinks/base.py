"""The sink interface: one class per output format, registered by its format name.

A sink is everything the runtime needs to know about one kind of output, so that adding
a format is one new module (see ``streamsmith.io.sinks``):

- its typed options (``Options``), validated when the plan is built, before Spark starts;
- which output modes it takes, and how ``dry-run`` describes it;
- how it starts a streaming query, idempotent per batch id (a replayed batch must not
  add its rows twice: Spark's file-sink log, a ledger, keys, or batch-named files);
- what ``--full-refresh`` removes, how ``check-upgrade`` judges a change of sink
  between restarts (:class:`UpgradeRules`), and how tests read its content back.

The lifecycle follows quix-streams' sinks and SDP's typed outputs: the plan builds a sink
from its options (:meth:`Sink.__init__`, no I/O), the runtime calls :meth:`Sink.start`
for each run of the query, and :meth:`Sink.reset` on a full refresh.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import StructType

from streamsmith.config import CdcSpec, PipelineSpec, StrictModel, Trigger
from streamsmith.errors import UserError
from streamsmith.io.delta import NO_SETTINGS, TableSettings
from streamsmith.io.lake import (
    TableFormat,
    read_table,
    start_foreach_batch,
    start_table_stream,
    table_path,
    write_table,
)
from streamsmith.object_store import remove_tree

OutputMode = Literal["append", "update", "complete"]
ALL_MODES: tuple[OutputMode, ...] = ("append", "update", "complete")


class SinkOptions(StrictModel):
    """A sink's own keys under ``flows.<flow>.sink`` (beside ``format`` and
    ``output_mode``); subclasses declare them as typed fields. Unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


@dataclass(frozen=True)
class SinkContext:
    """What a sink learns of the pipeline when the plan builds it."""

    spec: PipelineSpec
    app: str
    flow: str
    search_path: tuple[Path, ...] = ()  # where users' modules named by the sink are looked up
    # The sink's name under ``flows.<flow>.sinks`` (None under ``flows.<flow>.sink``), and
    # whether it is a further one (not the first), whose query is named after it.
    sink: str | None = None
    further: bool = False

    @property
    def root(self) -> Path:
        return self.spec.root

    @property
    def key(self) -> tuple[str, ...]:
        """Where the sink's keys are in the spec: ``flows.<flow>.sink`` or
        ``flows.<flow>.sinks.<name>``."""
        if self.sink is None:
            return ("flows", self.flow, "sink")
        return ("flows", self.flow, "sinks", self.sink)

    @property
    def query_name(self) -> str:
        """The name of the query writing this sink: ``<app>.<flow>`` for a flow's first
        sink, ``<app>.<flow>.<sink>`` for a further one."""
        own = f"{self.app}.{self.flow}"
        return f"{own}.{self.sink}" if self.further else own

    @property
    def cdc(self) -> CdcSpec | None:
        """The flow's change data capture rules, when its rows are change events."""
        flow = self.spec.flows.get(self.flow)
        return flow.cdc if flow is not None else None


@dataclass(frozen=True)
class QueryArgs:
    """One streaming query of a sink: Spark's name for it, its checkpoint, its trigger."""

    name: str
    checkpoint: Path
    trigger: Trigger
    output_mode: OutputMode


@dataclass(frozen=True)
class UpgradeRules:
    """How ``check-upgrade`` judges a change of this sink between restarts, by Spark's
    rules ("Recovery Semantics after Changes in a Streaming Query").

    ``family``: ``file`` (Spark's file sink), ``kafka``, ``foreach`` (``foreachBatch``
    and its like), or ``rebuilt`` (nothing to resume: a memory table is rebuilt every
    run). A query may switch between sinks of the ``foreach`` and ``kafka`` families, from
    a ``file`` sink to a ``kafka`` one, and to or from a ``rebuilt`` one.
    ``keeps_schema``: the written table keeps its first schema, so a new output schema
    needs a full refresh; with ``adds_columns`` it takes new columns (rows written
    before read them as null), and only a removed or retyped column needs the refresh.
    ``fixed_location``: a file sink's folder may not move.
    """

    family: Literal["file", "kafka", "foreach", "rebuilt"]
    keeps_schema: bool = False
    fixed_location: bool = False
    adds_columns: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "keeps_schema": self.keeps_schema,
            "fixed_location": self.fixed_location,
            "adds_columns": self.adds_columns,
        }


class Sink(ABC):
    """One output of a flow. Subclasses set the class attributes and implement
    :meth:`start`; the rest has defaults for a sink that keeps nothing in the lake.

    ``format`` is the name users write in the spec; ``kind`` the name plans, status,
    checkpoint fingerprints and the event log use (``table`` for a lake table, Delta or Parquet,
    ``topic`` for kafka, else the format).
    """

    format: ClassVar[str]
    kind: ClassVar[str]
    Options: ClassVar[type[SinkOptions]] = SinkOptions
    output_modes: ClassVar[tuple[OutputMode, ...]] = ("append",)
    upgrade: ClassVar[UpgradeRules] = UpgradeRules("foreach")
    # Whether ``target`` names a table (lake, database, memory): a flow's quarantine and
    # late-events tables are named after it, else after the flow.
    writes_table: ClassVar[bool] = False
    # Whether the sink applies a flow's change events by key (the flow's ``cdc``).
    applies_changes: ClassVar[bool] = False

    def __init__(self, options: SinkOptions, context: SinkContext) -> None:
        self.options = options
        self.context = context

    def counts_rows(self, spark: SparkSession) -> bool:
        """Whether Spark itself reports the rows each batch of this sink's query writes
        (``sink.numOutputRows`` in its progress: a Data Source V2 streaming write), so the
        query needs no observed count of its own (``runtime.start``). An observed count is
        an aggregate Spark plans, merges and reports at every batch: in Real-time Mode, at
        every checkpoint, between two batches' tasks."""
        return False

    @property
    @abstractmethod
    def target(self) -> str:
        """The table or topic written: one flow per target in a pipeline."""

    @property
    def lake_path(self) -> Path | None:
        """The lake folder this sink writes, if any (other flows may read it as a stream)."""
        return None

    @property
    def partition_by(self) -> tuple[str, ...]:
        """Partition columns, for the backfill of this output too."""
        return ()

    @property
    def table_format(self) -> TableFormat:
        """The format of the lake table this sink writes, and of its backfill."""
        return "delta"

    @property
    def table_settings(self) -> TableSettings:
        """The Delta table properties and clustering the sink declares (its backfill's too)."""
        return NO_SETTINGS

    @property
    def spark_name(self) -> str | None:
        """The name Spark must know the query by, when the sink decides it."""
        return None

    def describe(self) -> str:
        """Where the rows go, for ``dry-run``: never a secret."""
        return f"{self.kind} {self.target}"

    def refuses_mode(self, mode: OutputMode) -> str | None:
        """Why this sink, as configured, cannot run ``mode`` (one of ``output_modes``),
        or None; checked when the plan is built, before Spark starts."""
        return None

    def named_columns(self) -> dict[str, tuple[str, ...]]:
        """The columns of the flow's output that the sink's options name, by option."""
        return {"partition_by": self.partition_by}

    def check(self, frame: DataFrame) -> None:
        """Refuse (``UserError``, one line naming the flow and the option) an output
        ``frame`` this sink cannot write: one lacking a column the sink's options name.
        ``run`` calls it for each flow it analyses before any query starts, ``dry-run``
        over its empty stand-ins: one check for both commands."""
        where = ".".join(self.context.key[2:])
        for option, columns in self.named_columns().items():
            missing = [column for column in columns if column not in frame.columns]
            if missing:
                raise UserError(
                    f"flow {self.context.flow!r}: {where}.{option} names column(s) "
                    f"{', '.join(missing)} that the flow's output lacks (its columns: "
                    f"{', '.join(frame.columns)})"
                )

    @abstractmethod
    def start(self, spark: SparkSession, frame: DataFrame, query: QueryArgs) -> StreamingQuery:
        """Start the streaming query writing ``frame``, idempotent per batch id."""

    def create(self, spark: SparkSession, frame: DataFrame, at: Path | None = None) -> bool:
        """Create the sink's table (or one like it ``at`` another folder: ``dry-run``'s
        stand-in), empty, typed from ``frame`` (what the flow writes) unless it exists, so
        a flow reading it as a stream can start before its first batch; False for a sink
        whose output no flow can read as a stream (the default)."""
        return False

    def secrets(self) -> list[str]:
        """What the run must redact from its events and messages (resolved credentials)."""
        return []

    def check_reset(self) -> None:
        """Refuse (``UserError``) a ``reset`` that would remove what streamsmith did not
        write; every sink is asked before any checkpoint or output is removed."""
        return None  # a lake folder or a topic is only ever the sink's own

    def reset(self) -> list[str]:
        """Remove what the sink wrote, for ``--full-refresh``; says what was removed.

        The default removes the lake folder; sinks whose output others consume (Kafka
        topics) leave it alone.
        """

        path = self.lake_path
        if path is None or not path.exists():
            return []
        remove_tree(path)
        return [str(path)]

    def write_backfill(self, frame: DataFrame, path: Path, *, append: bool = False) -> None:
        """Replace the table at ``path`` with ``frame``, the flow's output over all its
        input as one batch (``streamsmith backfill``); with ``append``, add it: the table
        is another flow's too, and that flow's backfill wrote it first."""
        write_table(
            frame,
            path,
            self.partition_by,
            self.table_format,
            append=append,
            settings=self.table_settings,
        )

    def read_back(self, spark: SparkSession, schema: Callable[[], StructType]) -> DataFrame:
        """The sink's current content as a batch frame, for tests (``streamsmith.testing``);
        ``schema()`` gives the columns a sink that keeps no schema of its own (a database
        table) is read with (computing it plans a batch run, so only such sinks call it)."""
        raise ValueError(f"the {self.format} sink of flow {self.context.flow} cannot be read back")


def start_batches(
    frame: DataFrame, write: Callable[[DataFrame, int], None], query: QueryArgs
) -> StreamingQuery:
    """Start ``query`` handing each micro-batch and its id to ``write`` (``foreachBatch``)."""
    return start_foreach_batch(
        frame,
        write,
        name=query.name,
        checkpoint=query.checkpoint,
        trigger=query.trigger,
        output_mode=query.output_mode,
    )


class LakeTableOptions(SinkOptions):
    """``table``: a lake table's name (``<storage_root>/tables/<table>``)."""

    table: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")


class LakeBackedSink(Sink):
    """A sink keeping a lake table named by its ``table`` option: the table's folder is
    what a full refresh removes and what tests read back."""

    writes_table = True
    options: LakeTableOptions

    @property
    def target(self) -> str:
        return self.options.table

    @property
    def lake_path(self) -> Path:
        return table_path(self.context.root, self.options.table)

    def describe(self) -> str:
        return f"{self.table_format} {self.lake_path}"

    def read_back(self, spark: SparkSession, schema: Callable[[], StructType]) -> DataFrame:
        return read_table(spark, self.lake_path)

    def app_id(self, query: QueryArgs) -> str:
        """Who the table's commits name as their writer (``io.delta_marks``)."""
        return f"streamsmith:{self.context.app}:{query.name}"

    def start_file_sink(self, frame: DataFrame, query: QueryArgs) -> StreamingQuery:
        """``query`` appending ``frame`` to the table: marked Delta commits, or Spark's
        file sink, whose commit log makes each batch exactly once."""
        return start_table_stream(
            frame,
            name=query.name,
            path=self.lake_path,
            checkpoint=query.checkpoint,
            trigger=query.trigger,
            partition_by=self.partition_by,
            output_mode=query.output_mode,
            table_format=self.table_format,
            app_id=self.app_id(query),
        )
