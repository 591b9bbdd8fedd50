"""The records a streaming table's own file read rejects, kept for its quarantine.

An SDP flow reads its input itself (``spark.readStream.schema(s).json(path)``), and in
Spark's default ``PERMISSIVE`` mode a malformed JSON line or CSV row becomes a row of
nulls: nothing says it was ever malformed. While streamsmith builds a streaming flow's
frame, such a read (JSON or CSV, with a schema, ``PERMISSIVE``, no corrupt-record
column of the user's own) also keeps Spark's corrupt-record text and the file: the flow
gets the well-formed records it asked for, and the malformed ones join its output as
rejects (``_reject_reason``, ``_raw``, ``_source_file``), so they reach the table's
quarantine and its counts. The rejects are a second scan of the input (Spark reads a
source twice for two branches of one query); its rows are counted apart so the
records read stay those of one scan. A read the user configured otherwise (``DROPMALFORMED``,
``FAILFAST``, a corrupt-record column) is left as written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import reduce
from itertools import count
from operator import and_
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructType

from streamsmith.io.read_counts import READ_COUNT, REREAD
from streamsmith.transforms.json_reasons import MALFORMED_LINE
from streamsmith.transforms.quarantine import RAW, REJECT_REASON, SOURCE_FILE

CORRUPT = "_streamsmith_corrupt"
_scans = count()  # each rejects scan's number in its metric's name (io.read_counts)
REASONS = {"json": MALFORMED_LINE, "csv": "malformed CSV row"}
CORRUPT_OPTION = "columnNameOfCorruptRecord"
SPARK_CORRUPT = "_corrupt_record"  # Spark's default corrupt-record column
# Spark's CSV reader fails (ArrayIndexOutOfBoundsException in OrderedFilters) on a
# pushed filter that names no column over a scan that needs none, which the part of a
# quarantine query that can hold no reject is: such reads filter after parsing.
CSV_PUSHDOWN = "spark.sql.csv.filterPushdown.enabled"


def rejectable(source: str, schema: Any, options: Mapping[str, Any]) -> bool:
    """Whether a read of ``source`` format with ``schema`` (DDL text or a StructType;
    None: inferred) and ``options`` turns malformed records into rows of nulls: not when
    the user keeps them in a corrupt-record column of their own (Spark's default name in
    the schema, or another named by the option)."""
    lowered = {key.lower(): str(value) for key, value in options.items() if value is not None}
    text = schema.simpleString() if isinstance(schema, StructType) else str(schema)
    return (
        source.lower() in REASONS
        and schema is not None
        and lowered.get("mode", "PERMISSIVE").upper() == "PERMISSIVE"
        and CORRUPT_OPTION.lower() not in lowered
        and SPARK_CORRUPT not in text
    )


def widened(schema: str | StructType) -> str | StructType:
    """``schema`` with the column that keeps a malformed record's text."""
    if isinstance(schema, StructType):
        return StructType([*schema.fields]).add(CORRUPT, StringType())
    return f"{schema}, `{CORRUPT}` STRING"


def split(frame: DataFrame, source: str) -> tuple[DataFrame, DataFrame]:
    """(the well-formed records with the schema's columns, the malformed ones as rejects)
    of a ``frame`` read with :func:`widened` and the corrupt-record option."""
    data = [F.col(f"`{name}`") for name in frame.columns if name != CORRUPT]
    # Both tests name every data column, in a way that holds for every row: the readers
    # parse only the columns a query uses, so a record malformed in a column the flow
    # leaves out would pass one test and fail the other; and Spark refuses a read of
    # the corrupt-record column alone (QUERY_ONLY_CORRUPT_RECORD_COLUMN).
    named = reduce(and_, [column.isNull() | column.isNotNull() for column in data])
    accepted = frame.where(F.col(CORRUPT).isNull() & named).select(*data)
    scanned = frame
    if frame.isStreaming:  # Spark's input rows count this second scan's rows too
        scanned = frame.observe(f"{REREAD}{next(_scans)}", F.count(F.lit(1)).alias(READ_COUNT))
    rejects = scanned.where(F.col(CORRUPT).isNotNull() & named).select(
        F.lit(REASONS[source.lower()]).alias(REJECT_REASON),
        F.col(CORRUPT).alias(RAW),
        F.col("_metadata.file_path").alias(SOURCE_FILE),
    )
    return accepted, rejects


def with_rejects(output: DataFrame, rejects: Sequence[DataFrame]) -> DataFrame:
    """``output`` tagged as accepted, with the ``rejects`` of its reads after it (their
    output columns null): one frame the quarantine splits again."""
    tagged = output
    for name in (REJECT_REASON, RAW, SOURCE_FILE):
        if name not in tagged.columns:
            tagged = tagged.withColumn(name, F.lit(None).cast("string"))
    for rejected in rejects:
        tagged = tagged.unionByName(rejected, allowMissingColumns=True)
    return tagged
