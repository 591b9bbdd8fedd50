"""Schema changes between two Delta schemas, as `table history` names them."""

from __future__ import annotations

from streamsmith.io.delta_log import describe_change


def field(name: str, kind: object) -> dict[str, object]:
    return {"name": name, "type": kind, "nullable": True, "metadata": {}}


def test_added_changed_and_dropped_columns_are_named_with_their_types() -> None:
    point = {"type": "struct", "fields": [field("lat", "double")]}
    before = {"type": "struct", "fields": [field("id", "string"), field("geo", point),
                                           field("old", "long")]}  # fmt: skip
    grown = {"type": "struct", "fields": [*point["fields"], field("alt", "long")]}  # type: ignore[list-item]
    after = {"type": "struct", "fields": [field("id", "string"), field("geo", grown),
                                          field("tags", {"type": "array", "elementType": "integer",
                                                         "containsNull": True})]}  # fmt: skip
    assert describe_change(before, after) == (
        "added tags array<int>; changed geo: struct<lat:double> -> "
        "struct<lat:double,alt:bigint>; dropped old"
    )
    assert describe_change(after, after) == ""
