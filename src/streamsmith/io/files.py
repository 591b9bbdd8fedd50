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

import zlib
from collections.abc import Callable
from functools import cache
from typing import cast

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import arrow_udf
from pyspark.sql.readwriter import DataFrameReader
from pyspark.sql.streaming.readwriter import DataStreamReader
from pyspark.sql.types import StringType, StructField, StructType

from streamsmith.config import SourceSpec
from streamsmith.transforms.quarantine import RAW, READ_ERROR, SOURCE_FILE

BINARY_FILE_SCHEMA = "path string, modificationTime timestamp, length bigint, content binary"
_CORRUPT = "_corrupt_record"
_MALFORMED = {"jsonl": "malformed JSON line", "csv": "malformed CSV row"}
_GZIP_MAGIC = b"\x1f\x8b"


def decode_document(content: bytes) -> tuple[str | None, str | None]:
    """Bytes of one file -> ``(text, error)``; gzip is detected by its magic number.

    On failure the text is what could be decoded before the error (for the quarantine's
    raw payload) and the error says what went wrong and at which byte.
    """
    data = content
    if content[:2] == _GZIP_MAGIC:
        decompressor = zlib.decompressobj(wbits=31)
        try:
            data = decompressor.decompress(content) + decompressor.flush()
        except zlib.error as exc:
            return None, f"corrupt gzip data ({exc})"
        if not decompressor.eof:
            partial = data.decode("utf-8", errors="replace")
            return partial, f"truncated gzip file: stream ends after {len(content)} bytes"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return data.decode("utf-8", errors="replace"), f"not UTF-8 text at byte {exc.start}"


_DECODED_TYPE = StructType([StructField("text", StringType()), StructField("error", StringType())])


@cache
def _document_decoder() -> Callable[[Column], Column]:
    """The Arrow UDF that decodes each file's bytes, made on first use: planning a
    pipeline (``dry-run``, ``checkpoint show``) then needs no PyArrow."""
    import pyarrow as pa

    decoded = pa.struct([("text", pa.string()), ("error", pa.string())])

    def decode_documents(content: pa.Array) -> pa.Array:
        texts: list[str | None] = []
        errors: list[str | None] = []
        for value in content.to_pylist():
            text, error = decode_document(value)
            texts.append(text)
            errors.append(error)
        return pa.StructArray.from_arrays(
            [pa.array(texts, pa.string()), pa.array(errors, pa.string())], fields=list(decoded)
        )

    # PySpark tells an Arrow UDF by its type hints, resolved in the module's globals,
    # which do not hold ``pa`` (imported here, on use): give it the types themselves.
    decode_documents.__annotations__ = {"content": pa.Array, "return": pa.Array}
    udf = arrow_udf(_DECODED_TYPE)(decode_documents)  # type: ignore[call-overload]
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
) -> DataFrame:
    """Read a file source as a stream or as a batch, with the app's explicit schema.

    ``schema`` is the record schema for ``jsonl`` and ``csv`` and is ignored for ``json``
    documents (the app parses them) and ``text`` (one ``value`` string per line).
    """
    base: Reader = spark.readStream if streaming else spark.read
    reader = _with_common_options(base, spec, streaming)
    for key, value in spec.options.items():
        reader = reader.option(key, str(value).lower() if isinstance(value, bool) else str(value))
    if spec.format == "json":
        frame = reader.format("binaryFile").schema(BINARY_FILE_SCHEMA).load(path)
        decoded = _document_decoder()(F.col("content"))
        return frame.select(
            F.col("path").alias(SOURCE_FILE),
            decoded["text"].alias(RAW),
            decoded["error"].alias(READ_ERROR),
        )
    # JSON lines whose schema may not hold everything (schema evolution) or whose whole
    # record is kept (a variant column) are parsed by the flow from the whole line.
    if spec.format == "text" or (spec.format == "jsonl" and spec.reads_raw_json):
        frame = reader.format("text").load(path)
        return frame.select(
            F.col("value"),
            F.col("_metadata.file_path").alias(SOURCE_FILE),
            F.col("value").alias(RAW),
            F.lit(None).cast("string").alias(READ_ERROR),
        )
    if schema is None:
        raise ValueError(f"a {spec.format} source needs the app's record schema")
    if spec.format == "parquet":
        frame = reader.format("parquet").schema(schema).load(path)
        data = [F.col(field.name) for field in schema.fields]
        return frame.select(
            *data,
            F.col("_metadata.file_path").alias(SOURCE_FILE),
            F.to_json(F.struct(*data)).alias(RAW),
            F.lit(None).cast("string").alias(READ_ERROR),
        )
    with_corrupt = StructType([*schema.fields, StructField(_CORRUPT, StringType())])
    frame = (
        reader.format("json" if spec.format == "jsonl" else "csv")
        .schema(with_corrupt)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", _CORRUPT)
        .load(path)
    )
    data = [F.col(field.name) for field in schema.fields]
    # _raw of a parsed row is the row as JSON, so a later check can quarantine it with a
    # payload; it also keeps data columns referenced, which Spark requires of any query
    # that reads the corrupt-record column (QUERY_ONLY_CORRUPT_RECORD_COLUMN).
    return frame.select(
        *data,
        F.col("_metadata.file_path").alias(SOURCE_FILE),
        F.coalesce(F.col(_CORRUPT), F.to_json(F.struct(*data))).alias(RAW),
        F.when(F.col(_CORRUPT).isNotNull(), F.lit(_MALFORMED[spec.format])).alias(READ_ERROR),
    )
