"""Offset arithmetic of the Kafka source, without a broker."""

from __future__ import annotations

import pytest
from pyspark.sql.types import StringType, StructField, StructType

from streamsmith.io.admission import AdaptiveLimit, FileLimits
from streamsmith.io.kafka.offsets import (
    OffsetRange,
    OffsetSpecError,
    cap_by_rows,
    from_json_dict,
    parse_offset_spec,
    plan_tasks,
    resolve,
    split_ranges,
    spread_ranges,
    to_json_dict,
)
from streamsmith.io.kafka.sink import parse_sink_options
from streamsmith.io.kafka.source import KafkaOptionError, parse_options


def test_json_round_trip_matches_sparks_format() -> None:
    offsets = {("b", 10): 5, ("b", 2): 7, ("a", 0): 0}
    assert to_json_dict(offsets) == {"a": {"0": 0}, "b": {"2": 7, "10": 5}}
    assert from_json_dict(to_json_dict(offsets)) == offsets


def test_offset_specs() -> None:
    assert parse_offset_spec("startingOffsets", " Earliest ") == "earliest"
    assert parse_offset_spec("startingOffsets", '{"t": {"0": 5, "1": -2}}') == {
        ("t", 0): 5,
        ("t", 1): -2,
    }
    with pytest.raises(OffsetSpecError, match=r"startingOffsets='soon' is not earliest, latest"):
        parse_offset_spec("startingOffsets", "soon")
    with pytest.raises(OffsetSpecError, match="negative"):
        parse_offset_spec("startingOffsets", '{"t": {"0": -5}}')


def test_resolve_uses_sentinels_and_defaults() -> None:
    partitions = [("t", 0), ("t", 1), ("t", 2)]
    earliest = {("t", 0): 3, ("t", 1): 0, ("t", 2): 1}
    latest = {("t", 0): 9, ("t", 1): 4, ("t", 2): 8}
    spec = {("t", 0): 5, ("t", 1): -1}
    assert resolve(spec, partitions, earliest, latest) == {("t", 0): 5, ("t", 1): 4, ("t", 2): 1}
    assert resolve("latest", partitions, earliest, latest) == latest


@pytest.mark.parametrize("max_rows", [1, 7, 50, 99, 100, 1000])
def test_cap_by_rows_never_exceeds_and_shares_by_lag(max_rows: int) -> None:
    start = {("t", 0): 0, ("t", 1): 10, ("t", 2): 5}
    end = {("t", 0): 60, ("t", 1): 40, ("t", 2): 15, ("u", 0): 0}
    capped = cap_by_rows(start, end, max_rows)
    read = {tp: capped[tp] - start.get(tp, end[tp]) for tp in end}
    assert sum(read.values()) == min(max_rows, 100)
    assert all(0 <= read[tp] <= end[tp] - start.get(tp, end[tp]) for tp in end)
    if max_rows == 50:
        assert read == {("t", 0): 30, ("t", 1): 15, ("t", 2): 5, ("u", 0): 0}


def test_split_ranges() -> None:
    start = {("t", 0): 0, ("t", 1): 5}
    end = {("t", 0): 10, ("t", 1): 5, ("t", 2): 4}
    assert split_ranges(start, end) == [
        OffsetRange("t", 0, 0, 10),
    ]
    assert split_ranges(start, end, 4) == [
        OffsetRange("t", 0, 0, 4),
        OffsetRange("t", 0, 4, 8),
        OffsetRange("t", 0, 8, 10),
    ]


def test_source_options_are_validated_with_their_names() -> None:
    base = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "a, b"}
    parsed = parse_options({**base, "maxoffsetspertrigger": "10"}, streaming=True)
    assert parsed.subscription.topics == ("a", "b")
    assert parsed.starting_offsets == "latest" and parsed.max_offsets_per_trigger == 10
    assert parse_options(base, streaming=False).starting_offsets == "earliest"
    assign = parse_options(
        {"kafka.bootstrap.servers": "x:1", "assign": '{"t": [1, 0]}'}, streaming=True
    )
    assert assign.subscription.assignment == (("t", 0), ("t", 1))
    cases = {
        "kafka.bootstrap.servers is required": {"subscribe": "a"},
        "exactly one of subscribe": {**base, "subscribepattern": "a.*"},
        "maxoffsetspertrigger must be positive": {**base, "maxoffsetspertrigger": "0"},
        "failondataloss must be true or false": {**base, "failondataloss": "maybe"},
        "endingOffsets applies to batch reads only": {**base, "endingoffsets": "latest"},
        "assign=": {"kafka.bootstrap.servers": "x:1", "assign": "t:0"},
        "unknown Kafka source option.s. maxoffsetpertrigger": {**base, "maxoffsetpertrigger": "9"},
    }
    for message, options in cases.items():
        with pytest.raises(KafkaOptionError, match=message):
            parse_options(options, streaming=True)


def test_sink_options_are_checked_against_its_table() -> None:
    schema = StructType([StructField("value", StringType())])
    base = {"kafka.bootstrap.servers": "x:1", "topic": "out", "checkpointLocation": "/c"}
    assert parse_sink_options({**base, "kafka.acks": "all"}, schema).topic == "out"
    with pytest.raises(ValueError, match="unknown Kafka sink option.s. topics"):
        parse_sink_options({**base, "topics": "out"}, schema)


def test_adaptive_limit_grows_while_behind_and_halves_once_caught_up() -> None:
    limit = AdaptiveLimit(floor=10, cap=100)
    assert [limit.admit(backlog) for backlog in (500, 490, 450, 350)] == [10, 40, 100, 100]
    assert limit.current == 100
    assert [limit.admit(backlog) for backlog in (30, 5, 0, 0)] == [30, 5, 0, 0]
    assert limit.current == 10  # back at the floor
    with pytest.raises(ValueError, match="floor 0 must be in 1..100"):
        AdaptiveLimit(floor=0, cap=100)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"adaptiveBatches": "true"}, "needs maxOffsetsPerTrigger"),
        ({"adaptiveFloorOffsets": "5"}, "needs adaptiveBatches=true"),
        ({"adaptiveBatches": "true", "maxOffsetsPerTrigger": "10", "adaptiveFloorOffsets": "50"},
         "must not exceed maxOffsetsPerTrigger"),
    ],
)  # fmt: skip
def test_adaptive_options_are_checked(options: dict[str, str], message: str) -> None:
    base = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}
    with pytest.raises(KafkaOptionError, match=message):
        parse_options({k.lower(): v for k, v in {**base, **options}.items()}, streaming=True)
    chosen = parse_options(
        {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "adaptivebatches": "true",
         "maxoffsetspertrigger": "6400"}, streaming=True,
    )  # fmt: skip
    assert chosen.adaptive_floor == 100


def test_file_limits_switch_only_on_a_clear_change() -> None:
    limits = FileLimits(floor=2, cap=10)
    assert limits.choose(30, None) == 10 and limits.choose(2, None) == 2
    assert limits.choose(5, 10) == 10  # still behind
    assert limits.choose(2, 10) == 2  # caught up: back to the floor
    assert limits.choose(9, 2) == 2  # a burst that fits the cap: no restart for it
    assert limits.choose(11, 2) == 10


def test_min_partitions_spreads_ranges_in_proportion_to_their_size() -> None:
    ranges = [OffsetRange("t", 0, 0, 600), OffsetRange("t", 1, 100, 400), OffsetRange("t", 2, 0, 3)]

    spread = spread_ranges(ranges, 8)

    # 903 records, about 113 per task: 5 pieces of partition 0, 3 of 1, 1 of 2.
    assert [(r.partition, r.start, r.end) for r in spread] == [
        (0, 0, 120), (0, 120, 240), (0, 240, 360), (0, 360, 480), (0, 480, 600),
        (1, 100, 200), (1, 200, 300), (1, 300, 400),
        (2, 0, 3),
    ]  # fmt: skip
    assert spread_ranges(ranges, 3) == ranges  # already enough tasks
    # No piece under 300 records: partition 0 in two, partition 1 (300) whole.
    assert [(r.partition, r.start, r.end) for r in spread_ranges(ranges, 8, 300)] == [
        (0, 0, 300), (0, 300, 600), (1, 100, 400), (2, 0, 3),
    ]  # fmt: skip
    assert spread_ranges(ranges, None) == ranges


def test_small_ranges_are_packed_into_few_balanced_tasks() -> None:
    ranges = [
        OffsetRange("t", 0, 0, 4_000), OffsetRange("t", 1, 0, 3_000),
        OffsetRange("t", 2, 0, 90_000), OffsetRange("t", 3, 0, 5_000),
        OffsetRange("t", 4, 0, 1_000),
    ]  # fmt: skip

    def tasks(
        min_partitions: int | None, min_records: int, max_packed: int | None = None
    ) -> list[list[tuple[int, int, int]]]:
        planned = plan_tasks(ranges, min_partitions, min_records, max_packed)
        return [[(r.partition, r.start, r.end) for r in task] for task in planned]

    # Partition 2 reaches the floor and is a task of its own; the other 13,000 records
    # make two tasks of about 6,500, balanced by size, each in partition order.
    assert tasks(None, 6_500) == [
        [(2, 0, 90_000)],
        [(3, 0, 5_000), (4, 0, 1_000)],
        [(0, 0, 4_000), (1, 0, 3_000)],
    ]
    assert tasks(None, 6_500, max_packed=1) == [  # at most one task (one core) for them
        [(2, 0, 90_000)],
        [(0, 0, 4_000), (1, 0, 3_000), (3, 0, 5_000), (4, 0, 1_000)],
    ]
    # Large ranges are still spread over tasks, small ones packed beside them.
    assert tasks(4, 30_000) == [
        [(2, 0, 30_000)], [(2, 30_000, 60_000)], [(2, 60_000, 90_000)],
        [(0, 0, 4_000), (1, 0, 3_000), (3, 0, 5_000), (4, 0, 1_000)],
    ]  # fmt: skip
    # Without a floor every range is a task of its own, as Spark's source plans them.
    assert tasks(None, 0) == [[(r.partition, r.start, r.end)] for r in ranges]
