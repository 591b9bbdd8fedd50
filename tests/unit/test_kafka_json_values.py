"""JSON at the source, without Spark: alignment, nulls, errors and types."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from streamsmith.io.kafka.json_values import decode_json_values, unsupported_fields

SHAPE = pa.struct(
    [
        ("id", pa.string()),
        ("n", pa.int32()),
        ("day", pa.date32()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("tags", pa.list_(pa.string())),
        ("device", pa.struct([("battery", pa.float64()), ("seen", pa.date32())])),
    ]
)


def test_values_decode_in_order_with_nulls_and_errors() -> None:
    values = [
        b'{"id": "a", "n": 1, "day": "2026-11-21", "at": "2026-11-20T10:00:00Z", "x": {}}',
        None,
        b"   ",
        b'{"id": "b", "n": "two"}',
        b'{\n "id": "c",\r\n "device": {"battery": 0.25, "seen": "2026-01-02"}\n}',
        b"not json",
        b'{"day": "2026-02-30"}',
    ]
    parsed, errors = decode_json_values(values, SHAPE)

    rows = parsed.to_pylist()
    assert rows[0] == {
        "id": "a", "n": 1, "day": dt.date(2026, 11, 21),
        "at": dt.datetime(2026, 11, 20, 10, tzinfo=dt.UTC), "tags": None, "device": None,
    }  # fmt: skip
    assert rows[1] is None and rows[2] is None  # null and blank values: null, no error
    assert rows[4]["device"] == {"battery": 0.25, "seen": dt.date(2026, 1, 2)}
    assert [row is None for row in rows] == [False, True, True, True, False, True, True]
    messages = errors.to_pylist()
    assert [m is not None for m in messages] == [False, False, False, True, False, True, True]
    assert messages[3] == (
        "invalid JSON value: JSON parse error: Column(/n) changed from number to string"
    )


def test_map_fields_are_reported() -> None:
    shape = pa.struct(
        [("m", pa.map_(pa.string(), pa.int32())), ("s", pa.struct([("inner", pa.list_(
            pa.map_(pa.string(), pa.string())))]))]
    )  # fmt: skip
    assert unsupported_fields(shape) == ["m", "s.inner"]


def test_rows_stay_aligned_with_values_that_hold_two_objects_or_part_of_one() -> None:
    """Arrow reads objects, not lines: a value with two objects beside a blank one, or an
    object split over two values, must not shift the rows; each such value is an error."""
    shape = pa.struct([("a", pa.string()), ("b", pa.int64())])
    one, nulls = {"a": "1", "b": None}, {"a": None, "b": None}  # JSON null: as from_json
    for values, rows, bad in (
        ([b'{"a": "1"}{"a": "2"}', b""], [None, None], [True, False]),
        ([b'{"a": "1"} {"a"', b': "2"}'], [None, None], [True, True]),
        ([b'{"a": "}', b'{", "b": 1}', b'{"a": "3"}{"a": "4"}'], [None] * 3, [True] * 3),
        ([b'{"a": "x\ny"}', b"null", b'\n{"a": "1"}\n'], [None, nulls, one], [True, False, False]),
        ([b" null", b'{"a": "1"}'], [nulls, one], [False, False]),  # pyarrow 26 crashed
        ([b'{"a": "1"}', b'{"a": "1"}'], [one, one], [False, False]),
    ):
        parsed, errors = decode_json_values(values, shape)
        assert parsed.to_pylist() == rows, values
        assert [e is not None for e in errors.to_pylist()] == bad, values


def test_a_value_that_is_not_utf8_is_an_error_not_an_invalid_string() -> None:
    """Arrow's JSON reader copies invalid UTF-8 into its strings: the value must get a
    json_error (so it is quarantined with its raw bytes) and the column stay valid."""
    values = [b'{"id": "ok"}', b'{"id": "bad \xff here"}', b' {"id": "\xc3"}']
    parsed, errors = decode_json_values(values, SHAPE)

    assert errors.to_pylist() == [
        None,
        "invalid JSON value: not UTF-8 at byte 12",
        "invalid JSON value: not UTF-8 at byte 9",
    ]
    parsed.validate(full=True)
    assert [row and row["id"] for row in parsed.to_pylist()] == ["ok", None, None]
