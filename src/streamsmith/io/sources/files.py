"""Files: ``json`` documents, ``jsonl`` lines, ``csv``, ``text`` (gzipped or not), and
``parquet``, which pointed at a lake table follows that table's commit log: a flow can
consume another flow's output as a stream, committed batches only."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from streamsmith.config import FILE_FORMATS
from streamsmith.config.file_options import unknown_file_options
from streamsmith.errors import UserError
from streamsmith.io.files import read_files
from streamsmith.io.sources.base import Source, SourceKind


class FileSource(Source):
    """A folder of files, read by Spark's file source (each batch's files are logged in
    the checkpoint, so a replay reads the same files)."""

    formats: ClassVar[tuple[str, ...]] = FILE_FORMATS
    lineage: ClassVar[SourceKind | None] = "files"

    def check(self, name: str) -> None:
        problem = unknown_file_options(self.spec.format, self.spec.options)
        if problem is not None:
            raise UserError(f"sources.{name}.options: {problem}")

    def read(self, spark: SparkSession, schema: StructType | None, *, streaming: bool) -> DataFrame:
        assert self.path is not None  # the spec model requires it
        archive = self.spec.archive  # absolute once planned: files moved out once read
        more = [archive] if archive and not streaming and Path(archive).is_dir() else []
        return read_files(spark, self.spec, str(self.path), schema, streaming=streaming, more=more)

    def describe(self) -> str:
        spec = self.spec
        limits = []
        if spec.min_files_per_trigger:
            limits.append(
                f"adaptive maxFilesPerTrigger {spec.min_files_per_trigger}"
                f"..{spec.max_files_per_trigger}"
            )
        elif spec.max_files_per_trigger:
            limits.append(f"maxFilesPerTrigger={spec.max_files_per_trigger}")
        if spec.latest_first:
            limits.append("latestFirst")
        if spec.glob:
            limits.append(f"glob={spec.glob}")
        if spec.archive:
            limits.append(f"read files move to {spec.archive}")
        if spec.options:
            given = ", ".join(f"{k}={_shown(v)}" for k, v in sorted(spec.options.items()))
            limits.append(f"options {given}")
        return f"{spec.format} files in {self.path}" + (f" ({', '.join(limits)})" if limits else "")

    def identity(self) -> str:
        return str(self.path)

    def missing_input(self) -> str | None:
        if self.path is not None and not self.path.is_dir():
            return f"input directory {self.path}"
        return None


def _shown(value: object) -> str:
    """An option's value as Spark is handed it (booleans as ``true``/``false``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


SOURCE = FileSource
