"""Rows read from files of lines hold their line and its number from the read itself
(issue 50: no second pass over a file holding rejects), the same whether Spark splits
the files in the JVM or streamsmith's decoder splits them (``compression: gzip``)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from pyspark.sql import SparkSession

from streamsmith.config import SourceSpec
from streamsmith.io.files import read_files
from streamsmith.monitor.progress import records_read
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


def test_a_stream_of_files_of_lines_counts_their_records_not_spark_s_rows(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Spark counts each line of a text file as an input row (blank ones too), each line
    of a JSON-lines file but a blank one (the reader makes no row of it), and each
    gzipped file (decoded whole) as one; the records read of a batch are its lines (for
    JSON lines, those the JSON reader would read: not the blank one), gzipped or not, an
    empty file adding none."""
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain/flights.jsonl").write_bytes(DATA)
    (tmp_path / "plain/more.jsonl").write_bytes(b'{"flight": "AA4", "delay": 4}\n' * 2)
    (tmp_path / "plain/empty.jsonl").write_bytes(b"")
    (tmp_path / "gzipped").mkdir()
    for file in (tmp_path / "plain").iterdir():
        (tmp_path / f"gzipped/{file.name}.gz").write_bytes(gzip.compress(file.read_bytes()))

    def read(folder: str, **spec: object) -> tuple[int, int]:
        source = SourceSpec.model_validate({"path": str(tmp_path / folder), **spec})
        schema = spark.createDataFrame([], SCHEMA).schema
        frame = read_files(spark, source, source.path, schema, streaming=True)
        name = f"counted_{folder}_{source.format}"
        query = (
            frame.writeStream.format("noop")
            .queryName(name)
            .option("checkpointLocation", str(tmp_path / "checkpoints" / name))
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination()
        finally:
            query.stop()
        reports = [json.loads(progress.json) for progress in query.recentProgress]
        rows = sum(int(report["numInputRows"]) for report in reports)
        return rows, sum(records_read(report) for report in reports)

    assert read("plain", format="jsonl") == (7, 7)  # Spark's rows: the records
    assert read("plain", format="text") == (8, 8)  # a text file's blank line is a record
    rows, records = read("gzipped", format="jsonl", compression="gzip")
    assert (rows in (2, 3), records) == (True, 7)  # rows: the files (the empty one, if read)
