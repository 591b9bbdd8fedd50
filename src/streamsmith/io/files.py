"""File sources: directories of JSON documents, JSON lines, CSV or text, optionally gzipped.

Every reader returns the same lineage columns, so one quarantine mechanism serves all
formats: ``_source_file`` (where the row came from), ``_raw`` (the raw payload: the line
that failed to parse, the parsed row as JSON, or the document text) and ``_read_error``
(why it could not be read, or null).

``json`` sources hold one JSON *document* per file (CloudTrail's ``{"Records": [...]}``).
They are read as bytes and decoded in Python rather than with Spark's multi-line JSON
reader, because Spark fails the whole query on a truncated gzip file; here such a file
becomes one quarantined row naming the file and the decoder's error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from functools import cache, partial
from typing import cast

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import arrow_udf
from pyspark.sql.readwriter import DataFrameReader
from pyspark.sql.streaming.readwriter import DataStreamReader
from pyspark.sql.types import ArrayType, DataType, StringType, StructField, StructType

from streamsmith.config import SourceSpec
from streamsmith.config.file_options import json_parse_options
from streamsmith.io.decoding import MAX_DECOMPRESSED_BYTES, decode_document, decode_lines
from streamsmith.transforms.json_reasons import rejected_json_reason
from streamsmith.transforms.quarantine import RAW, RAW_TEXT, READ_ERROR, RECORD, SOURCE_FILE

BINARY_FILE_SCHEMA = "path string, modificationTime timestamp, length bigint, content binary"
_CORRUPT = "_corrupt_record"
LINE_FORMATS = ("jsonl", "text")  # one record per line: a quarantine row has its number
_NTH = "_nth"  # which of the rows (or lines) of a file holding one payload
_KEY = "_payload"  # what a quarantine row's raw payload is matched to
log = logging.getLogger(__name__)


_DECODED_TYPE = StructType([StructField("text", StringType()), StructField("error", StringType())])


@cache
def _document_decoder(max_bytes: int) -> Callable[[Column], Column]:
    """Each file's bytes -> its ``(text, error)``, as an Arrow UDF."""
    return _per_file(partial(decode_document, max_bytes=max_bytes), _DECODED_TYPE)


@cache
def _line_decoder(skip_blank: bool, max_bytes: int) -> Callable[[Column], Column]:
    """Each file's bytes -> its lines, each ``(text, error)``, as an Arrow UDF."""
    decode = partial(decode_lines, skip_blank=skip_blank, max_bytes=max_bytes)
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
        frame = load(reader.format("binaryFile").schema(BINARY_FILE_SCHEMA))
        max_bytes = spec.max_decompressed_mb << 20
        lines = _line_decoder(spec.format == "jsonl", max_bytes)(F.col("content"))
        line = F.col("_line")
        return frame.select(
            F.col("path").alias(SOURCE_FILE), F.explode(lines).alias("_line")
        ).select(
            F.when(line["error"].isNull(), line["text"]).alias("value"),
            F.col(SOURCE_FILE),
            line["text"].alias(RAW),
            line["text"].alias(RAW_TEXT),
            line["error"].alias(READ_ERROR),
        )
    # JSON lines whose schema may not hold everything (schema evolution) or whose whole
    # record is kept (a variant column) are parsed by the flow from the whole line.
    if spec.format == "text" or (spec.format == "jsonl" and spec.reads_raw_json):
        frame = load(reader.format("text"))
        return frame.select(
            F.col("value"),
            F.col("_metadata.file_path").alias(SOURCE_FILE),
            F.col("value").alias(RAW),
            F.col("value").alias(RAW_TEXT),
            F.lit(None).cast("string").alias(READ_ERROR),
        )
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
        reader.format("json" if spec.format == "jsonl" else "csv")
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
        F.when(F.col(_CORRUPT).isNotNull(), _corrupt_reason(spec, schema)).alias(READ_ERROR),
    )


def _corrupt_reason(spec: SourceSpec, schema: StructType) -> Column:
    """Why Spark's reader marked a row corrupt: for JSON lines, the field whose value does
    not fit when the line is well formed (``transforms.json_reasons``; computed for
    corrupt rows only, so clean input pays nothing)."""
    if spec.format != "jsonl":
        return F.lit("malformed CSV row")
    return rejected_json_reason(F.col(_CORRUPT), schema, json_parse_options(spec.options))


def with_line_numbers(
    rejected: DataFrame,
    schema: StructType | None = None,
    options: Mapping[str, str] | None = None,
    max_bytes: int = MAX_DECOMPRESSED_BYTES,
    *,
    decoded_here: bool = True,
) -> DataFrame:
    """Quarantine rows (``quarantined``'s schema) from JSON-lines and text files with
    ``position``, the 1-based number of their line in their file, and ``raw``, the line
    as it arrived.

    Spark's line readers say neither which line a row was (only Parquet has a row index)
    nor, for a row they parsed, what the line was: the clean path goes without both, and
    they are found here for the few rows of a batch that were rejected. Their files are
    read again (gzipped or not) and each row is matched to a line of its file: by its
    text (a line that did not parse, or one read as text), or, for a record rejected
    after parsing (a missing field, an expectation), by the record the line parses to
    with ``schema`` and ``options`` (as the JSON reader parsed it). Rows with the same
    file and payload were rejected alike, so the k-th of them gets the k-th such line. A
    row no line matches, or whose file is gone, keeps what it had (the log says so).
    ``decoded_here``: the files are decoded by streamsmith (gzipped by content, damage
    quarantined: ``decode_lines``); else Spark's text reader splits them, in the JVM.
    """
    from_lines = ~F.col("source_file").startswith("kafka://") & F.col("raw").isNotNull()
    unnumbered = F.coalesce(F.col("position").isNull() & from_lines, F.lit(False))
    wanted = rejected.where(unnumbered)
    files = sorted(row[0] for row in wanted.select("source_file").distinct().collect())
    if not files:
        return rejected
    try:
        lines = _numbered_lines(rejected.sparkSession, files, max_bytes, decoded_here=decoded_here)
    except AnalysisException as exc:  # a file moved away meanwhile
        log.warning("quarantine rows of %s keep no line number: %s", files, exc.getMessage())
        return rejected
    keys = [F.col("_text")]
    if schema is not None:
        keys.append(_parsed_json(F.col("_text"), schema, options or {}))
    payloads = wanted.select(F.col("source_file").alias("path"), F.col("raw").alias(_KEY))
    matches = (
        lines.select("*", F.explode(F.array_distinct(F.array_compact(F.array(*keys)))).alias(_KEY))
        .join(payloads.distinct(), ["path", _KEY], "left_semi")
        .withColumn(_NTH, F.row_number().over(Window.partitionBy("path", _KEY).orderBy("_number")))
    )
    numbered = wanted.withColumn(
        _NTH, F.row_number().over(Window.partitionBy("source_file", "raw").orderBy("reason"))
    )
    found = numbered.join(
        matches,
        (numbered["source_file"] == matches["path"])
        & (numbered["raw"] == matches[_KEY])
        & (numbered[_NTH] == matches[_NTH]),
        "left",
    )
    filled = {
        "position": F.col("_number").cast("string"),
        "raw": F.coalesce(F.col("_text"), numbered["raw"]),
    }
    return rejected.where(~unnumbered).unionByName(
        found.select(*(filled.get(name, numbered[name]).alias(name) for name in rejected.columns))
    )


def _numbered_lines(
    spark: SparkSession, files: list[str], max_bytes: int, *, decoded_here: bool
) -> DataFrame:
    """Every line of ``files`` (``path``, ``_number`` from 1, ``_text``), split as Spark's
    text reader splits them (``\\n``, ``\\r\\n`` or ``\\r``; blank lines count).

    Files Spark reads itself are split in the JVM (each file whole, as one text value):
    no Python worker and no Arrow transfer of the files' bytes, which made this second
    read of a batch's files the longest part of a quarantine with rejects spread over
    its input (``benchmarks/real_volume.py``). Files streamsmith decodes are decoded as
    the flow's read decoded them."""
    if decoded_here:
        content = spark.read.format("binaryFile").schema(BINARY_FILE_SCHEMA).load(files)
        exploded = content.select(
            F.col("path"), F.posexplode(_line_decoder(False, max_bytes)(F.col("content")))
        )
        text = F.col("col.text")
    else:
        whole = spark.read.format("text").option("wholetext", "true").load(files)
        split = F.split(F.col("value"), r"\r\n|\r|\n", -1)
        # No line after the last line break (Python's splitlines, decode_lines).
        lines = F.when(
            F.element_at(split, -1) == "", F.slice(split, 1, F.size(split) - 1)
        ).otherwise(split)
        exploded = whole.select(F.col("_metadata.file_path").alias("path"), F.posexplode(lines))
        text = F.col("col")
    return exploded.select("path", (F.col("pos") + 1).alias("_number"), text.alias("_text"))


def line_numbering(
    spec: SourceSpec, schema: StructType | None
) -> Callable[[DataFrame], DataFrame] | None:
    """:func:`with_line_numbers` for the quarantine rows of a source read line by line,
    with its record schema and JSON options; None for other sources."""
    if spec.format not in LINE_FORMATS:
        return None
    options = json_parse_options(spec.options)
    return partial(
        with_line_numbers,
        schema=schema,
        options=options,
        max_bytes=spec.max_decompressed_mb << 20,
        decoded_here=spec.decodes_files,
    )


def _parsed_json(line: Column, schema: StructType, options: Mapping[str, str]) -> Column:
    """``line`` parsed with ``schema`` and written back as JSON, as the file reader gives
    a parsed row's payload (see :func:`read_files`); null when it does not parse, or is
    blank (skipped by the reader; ``from_json`` of an empty text fails in Spark 4.2)."""
    with_corrupt = StructType([*schema.fields, StructField(_CORRUPT, StringType())])
    parse = {**options, "mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}
    record = F.from_json(line, with_corrupt, parse)
    data = F.struct(*(record[field.name].alias(field.name) for field in schema.fields))
    return F.when(F.trim(line) != "", F.when(record[_CORRUPT].isNull(), F.to_json(data)))
