"""File sources: directories of JSON documents, JSON lines, CSV or text, optionally gzipped.

Every reader returns the same lineage columns, so one quarantine mechanism serves all
formats: ``_source_file`` (where the row came from), ``_raw`` (the raw payload: a line as
it arrived, a CSV row that failed to parse or a parsed one as JSON, or the document text)
and ``_read_error`` (why it could not be read, or null); from JSON-lines and text files
also ``_position``, the line's number in its file (see :func:`_numbered_lines`).

Where Spark's input rows of a batch are not its records (a gzipped file decoded whole is
one row), the reader counts both per batch (``io.read_counts``), and
``monitor.progress.records_read`` puts the records in the rows' place in every query
that reads the source.

``json`` sources hold one JSON *document* per file (CloudTrail's ``{"Records": [...]}``).
They are read as bytes and decoded in Python rather than with Spark's multi-line JSON
reader, because Spark fails the whole query on a truncated gzip file; here such a file
becomes one quarantined row naming the file and the decoder's error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import cache, partial
from itertools import count
from typing import Protocol, cast

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import arrow_udf
from pyspark.sql.readwriter import DataFrameReader
from pyspark.sql.streaming.readwriter import DataStreamReader
from pyspark.sql.types import (
    ArrayType,
    DataType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from streamsmith.config import SourceSpec
from streamsmith.config.file_options import json_parse_options
from streamsmith.io.decoding import decode_document, decode_lines
from streamsmith.io.read_counts import FILES_READ, LINES_READ, READ_COUNT
from streamsmith.transforms.json_reasons import rejected_json_reason
from streamsmith.transforms.quarantine import (
    POSITION,
    RAW,
    RAW_TEXT,
    READ_ERROR,
    RECORD,
    SOURCE_FILE,
)

BINARY_FILE_SCHEMA = "path string, modificationTime timestamp, length bigint, content binary"
_CORRUPT = "_corrupt_record"
# streamsmith's line reader (its own jar): each line of a file with its number.
NUMBERED_LINES = "io.streamsmith.lines.NumberedLinesFormat"
_NUMBERED_SCHEMA = "value string, line bigint"
# The same reader parsing each line as JSON: the record's columns, the line and its number.
NUMBERED_JSON_LINES = "io.streamsmith.lines.NumberedJsonLinesFormat"
_LINE_TEXT = "_line_text"
_LINE_NUMBER = "_line_number"
_reads = count()  # each read's number in its metrics' names (io.read_counts)
log = logging.getLogger(__name__)


_DECODED_TYPE = StructType([StructField("text", StringType()), StructField("error", StringType())])


@cache
def _document_decoder(max_bytes: int) -> Callable[[Column], Column]:
    """Each file's bytes -> its ``(text, error)``, as an Arrow UDF."""
    return _per_file(partial(decode_document, max_bytes=max_bytes), _DECODED_TYPE)


@cache
def _line_decoder(max_bytes: int) -> Callable[[Column], Column]:
    """Each file's bytes -> its lines, each ``(text, error)``, as an Arrow UDF."""
    decode = partial(decode_lines, skip_blank=False, max_bytes=max_bytes)
    return _per_file(decode, ArrayType(_DECODED_TYPE))


def _per_file(decode: Callable[[bytes], object], kind: DataType) -> Callable[[Column], Column]:
    """``decode`` applied to each file's ``content``, as an Arrow UDF made on first use:
    planning a pipeline (``dry-run``, ``checkpoint show``) then needs no PyArrow."""
    import pyarrow as pa

    text_error = pa.struct([("text", pa.string()), ("error", pa.string())])
    arrow_type = pa.list_(text_error) if isinstance(kind, ArrayType) else text_error

    def decode_files(content: pa.Array) -> pa.Array:
        return pa.array([decode(value) for value in content.to_pylist()], arrow_type)

    # PySpark tells an Arrow UDF by its type hints, resolved in the module's globals,
    # which do not hold ``pa`` (imported here, on use): give it the types themselves.
    decode_files.__annotations__ = {"content": pa.Array, "return": pa.Array}
    udf = arrow_udf(kind)(decode_files)  # type: ignore[call-overload]
    return cast("Callable[[Column], Column]", udf)


Reader = DataStreamReader | DataFrameReader


def _with_common_options(reader: Reader, spec: SourceSpec, streaming: bool) -> Reader:
    if spec.recursive and spec.format != "parquet":  # a table's layout is its own
        reader = reader.option("recursiveFileLookup", "true")
    if spec.glob:
        reader = reader.option("pathGlobFilter", spec.glob)
    if streaming and isinstance(reader, DataStreamReader):
        if spec.max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", str(spec.max_files_per_trigger))
        if spec.latest_first:
            reader = reader.option("latestFirst", "true")
    return reader


def read_files(
    spark: SparkSession,
    spec: SourceSpec,
    path: str,
    schema: StructType | None,
    *,
    streaming: bool,
    more: Sequence[str] = (),
) -> DataFrame:
    """Read a file source as a stream or as a batch, with the app's explicit schema;
    a batch reads the folders ``more`` too (the source's archive).

    ``schema`` is the record schema for ``jsonl`` and ``csv`` and is ignored for ``json``
    documents (the app parses them) and ``text`` (one ``value`` string per line).
    """
    base: Reader = spark.readStream if streaming else spark.read

    def load(configured: Reader) -> DataFrame:
        if more:
            assert isinstance(configured, DataFrameReader), "a stream reads one folder"
            return configured.load([path, *more])
        return configured.load(path)

    counted = _read_counter(streaming)
    reader = _with_common_options(base, spec, streaming)
    for key, value in spec.options.items():
        reader = reader.option(key, str(value).lower() if isinstance(value, bool) else str(value))
    if spec.format == "json":
        frame = load(reader.format("binaryFile").schema(BINARY_FILE_SCHEMA))
        decoded = _document_decoder(spec.max_decompressed_mb << 20)(F.col("content"))
        return frame.select(
            F.col("path").alias(SOURCE_FILE),
            decoded["text"].alias(RAW),
            decoded["error"].alias(READ_ERROR),
        )
    if spec.decodes_files:  # gzipped or not, damage quarantined: see decode_lines
        frame = counted(load(reader.format("binaryFile").schema(BINARY_FILE_SCHEMA)), FILES_READ)
        lines = _line_decoder(spec.max_decompressed_mb << 20)(F.col("content"))
        line = F.col("col")
        numbered = frame.select(F.col("path").alias(SOURCE_FILE), F.posexplode(lines)).select(
            F.when(line["error"].isNull(), line["text"]).alias("value"),
            F.col(SOURCE_FILE),
            (F.col("pos") + 1).cast("long").alias(POSITION),
            line["text"].alias(RAW),
            line["text"].alias(RAW_TEXT),
            line["error"].alias(READ_ERROR),
        )
        if spec.format == "jsonl":  # a damaged file's row stays, blank or not
            numbered = numbered.where(F.col(READ_ERROR).isNotNull() | ~_blank(F.col(RAW)))
        return counted(numbered, LINES_READ)
    if spec.format in ("text", "jsonl"):
        # JSON lines whose schema may not hold everything (schema evolution) or whose whole
        # record is kept (a variant column) are parsed by the flow from the whole line.
        if spec.format == "text" or spec.reads_raw_json:
            numbered = _numbered_lines(load(reader.format(NUMBERED_LINES).schema(_NUMBERED_SCHEMA)))
            return numbered.select(
                "value",
                SOURCE_FILE,
                POSITION,
                F.col("value").alias(RAW),
                F.col("value").alias(RAW_TEXT),
                F.lit(None).cast("string").alias(READ_ERROR),
            )
        if schema is None:
            raise ValueError("a jsonl source needs the app's record schema")
        return _parsed_lines(reader, load, spec, schema)
    if schema is None:
        raise ValueError(f"a {spec.format} source needs the app's record schema")
    if spec.format == "parquet":
        frame = load(reader.format("parquet").schema(schema))
        data = [F.col(field.name) for field in schema.fields]
        return frame.select(
            *data,
            F.col("_metadata.file_path").alias(SOURCE_FILE),
            F.to_json(F.struct(*data)).alias(RAW),
            F.lit(None).cast("string").alias(READ_ERROR),
        )
    with_corrupt = StructType([*schema.fields, StructField(_CORRUPT, StringType())])
    frame = load(
        reader.format("csv")
        .schema(with_corrupt)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", _CORRUPT)
    )
    data = [F.col(field.name) for field in schema.fields]
    # _raw of a parsed row is the row as JSON, so a later check can quarantine it with a
    # payload; it also keeps data columns referenced, which Spark requires of any query
    # that reads the corrupt-record column (QUERY_ONLY_CORRUPT_RECORD_COLUMN). _raw_text
    # and _record give the same payload to a query that needs it for few rows only.
    return frame.select(
        *data,
        F.col("_metadata.file_path").alias(SOURCE_FILE),
        F.coalesce(F.col(_CORRUPT), F.to_json(F.struct(*data))).alias(RAW),
        F.col(_CORRUPT).alias(RAW_TEXT),
        F.struct(*data).alias(RECORD),
        F.when(F.col(_CORRUPT).isNotNull(), F.lit("malformed CSV row")).alias(READ_ERROR),
    )


class _Counter(Protocol):
    def __call__(self, frame: DataFrame, metric: str, *, barrier: bool = False) -> DataFrame: ...


def _read_counter(streaming: bool) -> _Counter:
    """``counted(frame, metric)``: ``frame`` counting its rows per micro-batch as the
    observed metric ``metric`` numbered for this read (``FILES_READ``, ``LINES_READ``);
    a batch read is counted by its job, and ``frame`` is returned as it is unless
    ``barrier`` asks for the observation anyway (a node Spark pushes no filter through)."""
    number = next(_reads)

    def counted(frame: DataFrame, metric: str, *, barrier: bool = False) -> DataFrame:
        if not streaming and not barrier:
            return frame
        return frame.observe(f"{metric}{number}", F.count(F.lit(1)).alias(READ_COUNT))

    return counted


def _numbered_lines(
    lines: DataFrame, *data: str, text: str = "value", number: str = "line"
) -> DataFrame:
    """The rows of :data:`NUMBERED_LINES` (or :data:`NUMBERED_JSON_LINES`) as a file
    source's lines: the columns ``data``, the line (``value``), its file and its number
    from 1 (``_position``; lines end at ``\\n``, ``\\r\\n`` or ``\\r``, blank lines count).

    Spark's line readers say neither a line's number nor, for a record they parsed, the
    line it came from: streamsmith's own readers (``spark/java/NumberedLinesFormat.java``
    and, parsing each JSON line as it reads it, ``NumberedJsonLinesFormat.java``) number
    the lines as they stream them, so a quarantine row has its line and its number from
    the one read all of a flow's outputs share, without a second pass over its file or a
    file whole in memory (``benchmarks/real_volume.py``). The price: a file is one task,
    as a number needs every line before it."""
    return lines.select(
        *data,
        F.col(text).alias("value"),
        F.col("_metadata.file_path").alias(SOURCE_FILE),
        F.col(number).alias(POSITION),
    )


def _blank(line: Column) -> Column:
    """A line Spark's JSON reader skips: nothing but white space."""
    return line.rlike(r"^\s*$")


def _parsed_lines(
    reader: Reader, load: Callable[[Reader], DataFrame], spec: SourceSpec, schema: StructType
) -> DataFrame:
    """JSON lines parsed with ``schema`` as Spark's JSON reader parses them
    (``PERMISSIVE``, the source's options) as :data:`NUMBERED_JSON_LINES` reads them;
    each row's raw payload is its line, and a corrupt one's reason names the field whose
    value does not fit when the line is well formed (``transforms.json_reasons``;
    computed for corrupt rows only). A blank line makes no row, so Spark's input rows
    are the records."""
    if clash := {_CORRUPT, _LINE_TEXT, _LINE_NUMBER} & set(schema.fieldNames()):
        raise ValueError(f"a jsonl source's schema may not name {', '.join(sorted(clash))}")
    given = json_parse_options(spec.options)
    columns = StructType(
        [*schema.fields, StructField(_CORRUPT, StringType()),
         StructField(_LINE_TEXT, StringType()), StructField(_LINE_NUMBER, LongType())]
    )  # fmt: skip
    options = {**given, "mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}
    lines = load(reader.format(NUMBERED_JSON_LINES).schema(columns).options(**options))
    names = schema.fieldNames()
    parsed = _numbered_lines(lines, *names, _CORRUPT, text=_LINE_TEXT, number=_LINE_NUMBER)
    corrupt = F.col(_CORRUPT)
    return parsed.select(
        *names,
        SOURCE_FILE,
        POSITION,
        F.col("value").alias(RAW),
        F.col("value").alias(RAW_TEXT),
        F.when(corrupt.isNotNull(), rejected_json_reason(corrupt, schema, given)).alias(READ_ERROR),
    )
