"""The source interface: one class per kind of input, serving one or more formats.

A source turns the spec's ``sources.<name>`` into a DataFrame with the lineage columns
the quarantine needs (``_source_file``, ``_position``, ``_raw``, ``_read_error``), as a
stream or as a batch over the same input, and says how ``dry-run`` shows it, what about
it a checkpoint depends on (``check-upgrade``), and whether its input exists. Adding a
kind of source is one module of ``streamsmith.io.sources``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from streamsmith.config import SourceSpec

# How a flow's side queries find the flow's batches that read a part of the input: by
# file (the file source's log) or by Kafka partition and offset (the offset log).
SourceKind = Literal["files", "kafka"]


@dataclass(frozen=True)
class Source(ABC):
    """One source of a flow: its spec (the pipeline's Kafka block merged in) and, for
    files, the input folder."""

    spec: SourceSpec
    path: Path | None = None

    formats: ClassVar[tuple[str, ...]]
    lineage: ClassVar[SourceKind | None] = None

    def check(self, name: str) -> None:
        """Reject settings the spec model cannot judge, before Spark starts."""
        return None

    @abstractmethod
    def read(self, spark: SparkSession, schema: StructType | None, *, streaming: bool) -> DataFrame:
        """The input with lineage columns; ``schema`` is the flow's record schema."""

    @abstractmethod
    def describe(self) -> str:
        """What ``dry-run`` shows after ``source <name>:``."""

    @abstractmethod
    def identity(self) -> str:
        """What the stored offsets belong to (a folder, subscribed topics): changing it
        between restarts needs a full refresh."""

    def missing_input(self) -> str | None:
        """Why the input cannot be read now (a folder that does not exist), or None."""
        return None
