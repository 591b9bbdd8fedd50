"""Matching a side query's batches to the flow query's batches that read their input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import Row, SparkSession

from streamsmith.runtime.flow_batches import (
    FLOW_METRIC,
    IDLE,
    NEVER,
    Facts,
    FlowFacts,
    MainQueryBehind,
    Part,
    await_main_commits,
    file_cover,
    kafka_cover,
    recomputed_after_main,
    reported_facts,
    watermark_before,
)
from streamsmith.runtime.late import late_possible
from streamsmith.runtime.source_logs import FileSourceLog
from streamsmith.transforms.events import may_be_late

Ends = dict[str, dict[str, int]]


def offset_log(checkpoint: Path, batches: dict[int, tuple[int, object]]) -> Path:
    """Spark's offset log: per batch, its watermark (ms) and its one source's offset."""
    (checkpoint / "offsets").mkdir(parents=True)
    for batch, (watermark_ms, offset) in batches.items():
        metadata = {"batchWatermarkMs": watermark_ms, "batchTimestampMs": 0}
        text = f"v1\n{json.dumps(metadata)}\n{json.dumps(offset)}"
        (checkpoint / "offsets" / str(batch)).write_text(text, encoding="utf-8")
    return checkpoint


def kafka_flow(tmp_path: Path) -> Path:
    # Batch 1 is a no-data batch (the watermark moved); batch 2 reads more.
    return offset_log(
        tmp_path / "flow",
        {
            0: (0, {"ads": {"0": 10, "1": 5}}),
            1: (7_000, {"ads": {"0": 10, "1": 5}}),
            2: (7_000, {"ads": {"0": 20, "1": 12}}),
        },
    )


def test_a_kafka_range_is_split_by_the_flow_batches_that_read_it(tmp_path: Path) -> None:
    flow = kafka_flow(tmp_path)
    start = {("ads", 0): 5, ("ads", 1): 0}
    end = {("ads", 0): 15, ("ads", 1): 12}

    assert kafka_cover(flow, start, end) == [
        Part(0, ranges=(("ads", 0, 5, 10), ("ads", 1, 0, 5))),
        Part(2, ranges=(("ads", 0, 10, 15), ("ads", 1, 5, 12))),
    ]
    # A side query's first batch: its start is not logged, so everything before its end.
    assert kafka_cover(flow, None, {("ads", 0): 4, ("ads", 1): 0}) == [
        Part(0, ranges=(("ads", 0, None, 4),))
    ]
    # The flow has not read offset 20 of partition 0 yet: wait.
    assert kafka_cover(flow, start, {("ads", 0): 21, ("ads", 1): 12}) is None
    # The watermark each part was dropped with is the one logged with the batch before.
    assert [watermark_before(flow, batch) for batch in (0, 1, 2)] == [None, None, 7_000_000]


def test_kafka_input_read_by_a_batch_whose_log_is_gone_cannot_be_matched(
    tmp_path: Path,
) -> None:
    flow = offset_log(
        tmp_path / "flow",
        {7: (1_000, {"ads": {"0": 10}}), 8: (2_000, {"ads": {"0": 20}})},
    )
    assert kafka_cover(flow, {("ads", 0): 5}, {("ads", 0): 15}) is NEVER
    assert kafka_cover(flow, {("ads", 0): 12}, {("ads", 0): 15}) == [
        Part(8, ranges=(("ads", 0, 12, 15),))
    ]


def test_files_are_matched_to_the_batch_that_listed_them(tmp_path: Path) -> None:
    flow = offset_log(
        tmp_path / "flow",
        {0: (0, {"logOffset": 0}), 1: (5_000, {"logOffset": 0}), 2: (5_000, {"logOffset": 1})},
    )
    sources = flow / "sources" / "0"
    sources.mkdir(parents=True)
    for log_id, names in ((0, ["a", "b"]), (1, ["c"])):
        lines = [json.dumps({"path": f"file:///in/{n}.json", "timestamp": 0, "batchId": log_id})
                 for n in names]  # fmt: skip
        (sources / str(log_id)).write_text("v1\n" + "\n".join(lines), encoding="utf-8")

    log = FileSourceLog(flow)
    assert file_cover(log, ["/in/c.json", "/in/a.json"]) == [
        Part(0, files=("/in/a.json",)),
        Part(2, files=("/in/c.json",)),
    ]
    assert file_cover(log, ["/in/d.json"]) is None  # not listed yet


@pytest.mark.parametrize(
    ("time_s", "watermark_s", "window", "slide", "late"),
    [
        (5, 10, None, None, True),  # no window: at or before the watermark
        (10, 10, None, None, True),
        (11, 10, None, None, False),
        (9, 10, "10 seconds", None, True),  # its window [0, 10) ends at the watermark
        (10, 10, "10 seconds", None, False),  # [10, 20) is still open
        (14, 20, "10 seconds", "5 seconds", True),  # [5, 15) ends before 20
        (15, 20, "10 seconds", "5 seconds", True),  # [10, 20) ends at the watermark
        (20, 20, "10 seconds", "5 seconds", False),  # [15, 25) and [20, 30) are open
    ],
)
def test_may_be_late_is_the_rule_of_too_late(
    time_s: int, watermark_s: int, window: str | None, slide: str | None, late: bool
) -> None:
    assert may_be_late(time_s * 10**6, watermark_s * 10**6, window, slide) is late


def test_a_report_is_trusted_only_for_a_batch_that_read_input() -> None:
    metric = {FLOW_METRIC: Row(rows=2, oldest_us=1_000)}
    assert reported_facts(500, metric) == Facts(rejected=2, oldest_us=1_000)
    # A batch Spark's file sink skipped on restart: nothing read, the metric zeroed.
    assert reported_facts(0, {FLOW_METRIC: Row(rows=0, oldest_us=None)}) is None
    # An idle query's report names the next batch, which has not run yet.
    assert reported_facts(0, {}) == IDLE
    # A batch that read input but whose plan observed nothing: not known.
    assert reported_facts(500, {}) is None


def test_a_report_carries_the_rejected_rows_only_when_it_holds_every_one() -> None:
    rows = [
        Row(_reject_reason="malformed JSON line", _source_file="f", _raw="{oops"),
        Row(_reject_reason="event_type is none of view", _source_file="f", _raw='{"a":1}'),
    ]
    carried = reported_facts(500, {FLOW_METRIC: Row(rows=2, oldest_us=None, rejects=rows)})
    assert carried is not None and carried != IDLE
    assert carried.rejects == (
        {"_reject_reason": "malformed JSON line", "_source_file": "f", "_raw": "{oops"},
        {"_reject_reason": "event_type is none of view", "_source_file": "f", "_raw": '{"a":1}'},
    )
    # Read back from the progress JSON, the rows are plain objects.
    as_json = {"rows": 1, "oldest_us": None, "rejects": [{"_raw": "x", "_reject_reason": "r"}]}
    assert reported_facts(10, {FLOW_METRIC: as_json}) == Facts(
        1, None, ({"_raw": "x", "_reject_reason": "r"},)
    )
    # Too many or too long to carry (null), or fewer than were rejected: read again.
    assert reported_facts(500, {FLOW_METRIC: Row(rows=3, oldest_us=None, rejects=None)}) == Facts(
        3, None, None
    )
    short = Row(rows=3, oldest_us=None, rejects=rows)
    assert reported_facts(500, {FLOW_METRIC: short}) == Facts(3, None, None)


def test_the_facts_of_batches_before_those_last_asked_for_are_dropped(spark: SparkSession) -> None:
    facts = FlowFacts(spark, "a flow not running in this process")
    rejects = ({"_raw": "{oops", "_reject_reason": "malformed JSON line"},)
    facts._seen.update({batch: Facts(1, None, rejects) for batch in range(100)})
    assert facts.of([40, 41]) == {40: Facts(1, None, rejects), 41: Facts(1, None, rejects)}
    assert sorted(facts._seen) == list(range(40, 100))  # a side query reads on from 40
    assert facts.of([39]) is None  # a replay asking again reads its input itself
    assert facts.of([40]) == {40: Facts(1, None, rejects)}


def _log(checkpoint: Path, planned: int, committed: int | None) -> Path:
    """A query's offset and commit logs, as far as they matter here."""
    for folder, last in (("offsets", planned), ("commits", committed)):
        (checkpoint / folder).mkdir(parents=True, exist_ok=True)
        for batch in range(-1 if last is None else last + 1):
            (checkpoint / folder / str(batch)).write_text("v1\n{}\n")
    return checkpoint


def test_a_side_batch_computed_again_after_its_flow_committed_it_is_named(
    tmp_path: Path,
) -> None:
    """The one case no ordering makes whole: the run stopped between the flow's commit and
    its side query's, so the side batch is computed under the new spec alone."""
    flow = _log(tmp_path / "flow", planned=3, committed=3)
    side = _log(tmp_path / "side", planned=2, committed=1)
    note = recomputed_after_main(flow, side)
    assert note is not None and note.startswith("its batch 2 is computed again under this spec")
    # Both left the batch uncommitted (the flow failed it): both compute it again alike.
    assert recomputed_after_main(_log(tmp_path / "failed", planned=3, committed=2), side) is None
    assert recomputed_after_main(flow, _log(tmp_path / "done", planned=2, committed=2)) is None


def test_a_side_batch_waits_for_its_flow_to_commit_and_fails_when_it_stops(
    tmp_path: Path,
) -> None:
    flow = _log(tmp_path / "flow", planned=4, committed=3)
    await_main_commits(flow, [2, 3], lambda: False, "side batch 7", wait_s=5)  # committed
    with pytest.raises(MainQueryBehind, match=r"side batch 7: the flow's batch 4 .* has not"):
        await_main_commits(flow, [3, 4], lambda: False, "side batch 7", wait_s=5)


@pytest.mark.parametrize(
    ("batches", "possible"),
    [
        ({}, False),  # nothing read yet
        ({0: (0, {"logOffset": 0})}, False),  # a first batch: no watermark yet
        ({0: (0, {"logOffset": 0}), 1: (5_000, {"logOffset": 0})}, False),  # then no data
        ({0: (0, {"logOffset": 0}), 1: (5_000, {"logOffset": 0}), 2: (5_000, {"logOffset": 1})},
         True),  # more input under the watermark
        ({5: (5_000, {"logOffset": 3}), 6: (5_000, {"logOffset": 3})}, True),  # log cut: unsure
    ],
)  # fmt: skip
def test_late_events_are_possible_only_after_input_read_under_a_watermark(
    tmp_path: Path, batches: dict[int, tuple[int, object]], possible: bool
) -> None:
    assert late_possible(offset_log(tmp_path / "flow", batches)) is possible
