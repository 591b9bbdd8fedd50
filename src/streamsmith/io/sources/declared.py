"""The source of a flow whose own code reads its input: a Spark Declarative Pipelines
flow (``spark.readStream.format("json").load(path)`` in a ``@dp.table`` function).

The flow's function is its whole query, reads included, so this source hands the
transform nothing it uses; it says what the code reads (``dry-run``) and stands for it
in the checkpoint's identity (``check-upgrade``).
"""

from __future__ import annotations

from typing import ClassVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from streamsmith.io.sources.base import Source

READS = "reads"  # the option holding what the code reads, for dry-run


class DeclaredSource(Source):
    """Input the flow's own code reads."""

    formats: ClassVar[tuple[str, ...]] = ("sdp",)

    def read(self, spark: SparkSession, schema: StructType | None, *, streaming: bool) -> DataFrame:
        return spark.range(0)  # the flow's function reads for itself

    def describe(self) -> str:
        reads = str(self.spec.options.get(READS) or "")
        return f"read by the flow's own code{': ' + reads if reads else ''}"

    def identity(self) -> str:
        return f"sdp {self.spec.options.get(READS) or ''}".strip()


SOURCE = DeclaredSource
