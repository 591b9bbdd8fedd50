"""Rows read from files of lines hold their line and its number from the read itself
(issue 50: no second pass over a file holding rejects), the same whether Spark splits
the files in the JVM or streamsmith's decoder splits them (``compression: gzip``)."""

from __future__ import annotations

import gzip
from pathlib import Path

from pyspark.sql import SparkSession

from streamsmith.config import SourceSpec
from streamsmith.io.files import read_files
from streamsmith.transforms.quarantine import POSITION, RAW, READ_ERROR

SCHEMA = "flight string, delay int"
DATA = (
    b'{"flight": "AA1", "delay": 1}\r\n'  # a Windows line end
    b"\n"  # a blank line counts
    b'{"flight": "AA2", "delay": "n/a"}\r'  # an old Mac line end
    b'{"flight": "AA3"  ,  "delay": 3}\n'  # kept as it arrived, spaces and all
    b"not json \xff\n"  # not UTF-8
    b'{"flight": "AA2", "delay": "n/a"}'  # the same text again, no line end at the end
)


def numbered(spark: SparkSession, folder: Path, **spec: object) -> list[tuple[object, ...]]:
    source = SourceSpec.model_validate({"format": "jsonl", "path": str(folder), **spec})
    schema = spark.createDataFrame([], SCHEMA).schema
    rows = read_files(spark, source, str(folder), schema, streaming=False).collect()
    found = [row.asDict() for row in rows]  # a decoded file's lines are parsed by the flow
    return sorted(
        (row[POSITION], row[RAW], row[READ_ERROR] is not None, row.get("flight")) for row in found
    )


def test_each_row_has_its_line_and_number_from_the_one_read(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain/flights.jsonl").write_bytes(DATA)
    (tmp_path / "gzipped").mkdir()
    (tmp_path / "gzipped/flights.jsonl.gz").write_bytes(gzip.compress(DATA))

    in_jvm = numbered(spark, tmp_path / "plain")

    assert [(position, raw, rejected) for position, raw, rejected, _ in in_jvm] == [
        (1, '{"flight": "AA1", "delay": 1}', False),
        (3, '{"flight": "AA2", "delay": "n/a"}', True),
        (4, '{"flight": "AA3"  ,  "delay": 3}', False),
        (5, "not json \ufffd", True),
        (6, '{"flight": "AA2", "delay": "n/a"}', True),
    ]
    assert [flight for *_, flight in in_jvm] == ["AA1", "AA2", "AA3", None, "AA2"]
    decoded = numbered(spark, tmp_path / "gzipped", compression="gzip")
    assert [(position, raw) for position, raw, *_ in decoded] == [
        (position, raw) for position, raw, *_ in in_jvm
    ]
