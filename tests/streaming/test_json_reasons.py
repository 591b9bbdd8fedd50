"""Why a JSON line is rejected, as the file reader says it: the field that does not fit
its type, or the line not being JSON (issue 39, item 3)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from streamsmith.config import SourceSpec
from streamsmith.io.files import read_files
from streamsmith.schemas.ddl import parse_schema
from streamsmith.transforms.json_reasons import NOT_UTF8
from streamsmith.transforms.quarantine import RAW, READ_ERROR

LINES = [
    '{"flight": "AA1", "date": "2001/01/06 15:01", "day": "2001-01-06", "delay": 5}',
    '{"flight": "AA2", "date": "2001-01-06T15:01:00", "day": "06.01.2001", "delay": 1}',
    '{"flight": "AA3", "date": "2001-01-06T15:01:00", "delay": {"minutes": 3}}',
    "[1, 2]",
    '{"flight": "AA4", "date": ',
]


def test_a_well_formed_line_names_the_field_and_the_format_to_set(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "part-0.jsonl").write_text("\n".join(LINES) + "\n")
    spec = SourceSpec.model_validate(
        {"format": "jsonl", "path": str(tmp_path), "options": {"dateFormat": "yyyy-MM-dd"}}
    )
    schema = parse_schema("flight string, date timestamp, day date, delay int")
    rows = read_files(spark, spec, str(tmp_path), schema, streaming=False).collect()
    reasons = {row[RAW]: row[READ_ERROR] for row in rows}
    assert reasons == {
        LINES[0]: 'field date: "2001/01/06 15:01" is not a timestamp (ISO 8601, e.g. '
        "2001-01-06T15:01:00; set options.timestampFormat)",
        LINES[1]: 'field day: "06.01.2001" is not a date (format yyyy-MM-dd)',
        LINES[2]: 'field delay: {"minutes":3} is not an int',
        LINES[3]: "malformed JSON line",
        LINES[4]: "malformed JSON line",
    }


def test_a_line_that_is_not_utf8_is_rejected_as_such(spark: SparkSession, tmp_path: Path) -> None:
    """Each line is parsed from its bytes, as Spark's JSON reader does: bytes that are not
    UTF-8 reject the record, saying so, where a character decoder would have put U+FFFD
    in their place and kept it."""
    (tmp_path / "part-0.jsonl").write_bytes(b'{"flight": "AA1"}\n{"flight": "A\xffA2"}\n')
    spec = SourceSpec.model_validate({"format": "jsonl", "path": str(tmp_path)})
    rows = read_files(spark, spec, str(tmp_path), parse_schema("flight string"), streaming=False)
    found = [(row.flight, row[READ_ERROR]) for row in rows.orderBy("_position").collect()]
    assert found == [("AA1", None), (None, NOT_UTF8)]
