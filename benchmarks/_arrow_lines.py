"""JSON-lines files decoded by Arrow inside a Python data source: the alternative to
Spark's own JSON reader that ``ysb_stages.py`` measures for the file path.

A batch reader, one task per file: the lines go through the Kafka source's decoder
(``decode_json_values``: one Arrow pass when every line is one object, a line-by-line
error otherwise), and come out with the same lineage columns as streamsmith's file
sources, so the app's parse and quarantine rules apply unchanged. Registered by value
(this folder is not on the Python workers' path).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import StructType

from streamsmith.io.kafka.json_values import decode_json_values
from streamsmith.transforms.quarantine import RAW, READ_ERROR, SOURCE_FILE

NAME = "bench_arrow_lines"
ROWS_PER_BATCH = 10_000  # as Spark's spark.sql.execution.arrow.maxRecordsPerBatch
TAGS = (SOURCE_FILE, RAW, READ_ERROR)  # what streamsmith's JSON-lines reader adds


@dataclass(frozen=True)
class _File(InputPartition):
    path: str


class _Reader(DataSourceReader):
    def __init__(self, folder: str, schema: StructType) -> None:
        self.folder = folder
        self.record = StructType(schema.fields[: -len(TAGS)])

    def partitions(self) -> list[_File]:
        return [_File(str(path)) for path in sorted(Path(self.folder).glob("*.json"))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _File)
        struct_type = to_arrow_type(self.record, timezone="UTC")
        lines = [line for line in Path(partition.path).read_bytes().split(b"\n") if line.strip()]
        for first in range(0, len(lines), ROWS_PER_BATCH):
            chunk = lines[first : first + ROWS_PER_BATCH]
            parsed, errors = decode_json_values(chunk, struct_type)  # type: ignore[arg-type]
            columns = [parsed.field(index) for index in range(parsed.type.num_fields)]
            where = pa.repeat(pa.scalar(partition.path), len(chunk))
            columns += [where, _raw(chunk, errors), errors]
            yield pa.RecordBatch.from_arrays(columns, names=[*self.record.fieldNames(), *TAGS])


def _raw(lines: list[bytes], errors: pa.StringArray) -> pa.StringArray:
    """The line itself where it failed to decode, as the quarantine keeps it; else null."""
    if errors.null_count == len(errors):  # every line decoded
        return pa.nulls(len(lines), pa.string())
    kept = [None if e is None else v.decode("utf-8", "replace")
            for v, e in zip(lines, errors.to_pylist(), strict=True)]  # fmt: skip
    return pa.array(kept, pa.string())


def read_arrow_lines(spark: SparkSession, folder: str, schema: StructType) -> DataFrame:
    """``folder``'s JSON lines in ``schema``, decoded by Arrow, plus the lineage columns."""
    ddl = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in schema.fields)

    class ArrowLines(DataSource):
        @classmethod
        def name(cls) -> str:
            return NAME

        def schema(self) -> str:
            return ", ".join([ddl, *(f"`{tag}` string" for tag in TAGS)])

        def reader(self, schema: StructType) -> _Reader:
            return _Reader(self.options["path"], schema)

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(ArrowLines)
    return spark.read.format(NAME).option("path", folder).load()
