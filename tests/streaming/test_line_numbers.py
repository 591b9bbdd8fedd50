"""Quarantine rows get their line and its number from the files Spark reads itself by a
read in the JVM, equal to what streamsmith's own decoder finds (issue 50)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.types import IntegerType, StringType, StructField, StructType
from pyspark.testing import assertDataFrameEqual

from streamsmith.io.files import with_line_numbers

SCHEMA = StructType([StructField("flight", StringType()), StructField("delay", IntegerType())])
COLUMNS = "reason string, source_file string, position string, raw string"


def test_the_jvm_split_numbers_lines_as_the_decoder_does(
    spark: SparkSession, tmp_path: Path
) -> None:
    data = (
        b'{"flight": "AA1", "delay": 1}\r\n'  # a Windows line end
        b"\n"  # a blank line counts
        b'{"flight": "AA2", "delay": "n/a"}\r'  # an old Mac line end
        b'{"flight": "AA3"  ,  "delay": 3}\n'  # rejected after parsing: found by its record
        b"not json \xff\n"  # not UTF-8
        b'{"flight": "AA2", "delay": "n/a"}'  # the same text again, no line end at the end
    )
    file = tmp_path / "flights.jsonl"
    file.write_bytes(data)
    path = spark.read.format("text").load(str(file)).select("_metadata.file_path").first()[0]
    rejected = spark.createDataFrame(
        [
            ("malformed", path, None, '{"flight": "AA2", "delay": "n/a"}'),
            ("malformed", path, None, '{"flight": "AA2", "delay": "n/a"}'),
            ("expectation", path, None, '{"flight":"AA3","delay":3}'),
            ("kafka", "kafka://t/0", "7", "x"),
        ],
        COLUMNS,
    )

    in_jvm = with_line_numbers(rejected, SCHEMA, {}, decoded_here=False)
    decoded = with_line_numbers(rejected, SCHEMA, {}, decoded_here=True)

    assertDataFrameEqual(in_jvm, decoded)
    found = sorted((r.position, r.raw) for r in in_jvm.collect())
    assert found == [
        ("3", '{"flight": "AA2", "delay": "n/a"}'),
        ("4", '{"flight": "AA3"  ,  "delay": 3}'),
        ("6", '{"flight": "AA2", "delay": "n/a"}'),
        ("7", "x"),
    ]
