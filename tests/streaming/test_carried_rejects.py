"""The rejects a flow's main query carried become its quarantine rows, each part of a
side batch keeping the rows of its own input (built from Arrow, in the JVM)."""

from __future__ import annotations

from pyspark.sql import SparkSession

from streamsmith.runtime.clean_input import carried_frame
from streamsmith.runtime.flow_batches import Facts, Part
from streamsmith.transforms.quarantine import POSITION, RAW, REJECT_REASON, SOURCE_FILE


def reject(reason: str, file: str, raw: str) -> dict[str, str | None]:
    return {REJECT_REASON: reason, SOURCE_FILE: file, POSITION: None, RAW: raw}


def test_carried_rejects_are_the_quarantine_rows_of_the_parts_input(spark: SparkSession) -> None:
    mine, other = "file:/in/a.jsonl", "file:/in/b.jsonl"
    seen = {
        3: Facts(2, None, (reject("malformed", mine, "{x"), reject("late", other, "{y"))),
        4: Facts(0, None, ()),
        5: Facts(1, None, (reject("missing flight", mine, '{"a": 1}'),)),
    }
    read = ("/in/a.jsonl",)  # as the file source's log names it
    parts = [Part(3, files=read), Part(4, files=read), Part(5, files=read)]

    frame = carried_frame(spark, parts, seen)

    assert frame is not None
    found = sorted((r.reason, r.source_file, r.raw) for r in frame.collect())
    assert found == [("malformed", mine, "{x"), ("missing flight", mine, '{"a": 1}')]


def test_no_carried_frame_when_a_batch_did_not_carry_its_rejects(spark: SparkSession) -> None:
    seen = {3: Facts(2, None, None)}
    assert carried_frame(spark, [Part(3, files=("file:/in/a.jsonl",))], seen) is None
