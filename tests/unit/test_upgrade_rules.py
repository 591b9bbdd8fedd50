"""check-upgrade's rules (Spark's "changes allowed between restarts") on fingerprints."""

from __future__ import annotations

from typing import Any

import pytest

from streamsmith.runtime.checkpoints import _normalise, compare

AGGREGATE = {"operator": "Aggregate", "definition": "Aggregate [window, user], [count(1)]",
             "types": ["struct<start:timestamp,end:timestamp>", "string", "bigint"]}  # fmt: skip


def fingerprint(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "query": "app.flow",
        "source": {"format": "jsonl", "input": "/data/in"},
        "sink": {"kind": "table", "target": "/lake/t", "mode": "append"},
        "output_schema": [["user", "string"], ["tally", "bigint"]],
        "stateful": [AGGREGATE],
    }
    return {**base, **changes}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"source": {"format": "kafka", "input": "subscribe=t"}}, "source changed from jsonl"),
        ({"source": {"format": "jsonl", "input": "/data/other"}}, "source input changed"),
        ({"sink": {"kind": "table", "target": "/lake/u", "mode": "append"}}, "table moved"),
        ({"output_schema": [["user", "string"]]}, "output schema changed (user string, tally"),
        ({"stateful": []}, "stateful operators changed (Aggregate -> none)"),
        ({"stateful": [{**AGGREGATE, "types": ["string", "string", "double"]}]}, "state schema"),
    ],
)
def test_breaking_changes_need_a_full_refresh(change: dict[str, Any], reason: str) -> None:
    verdict = compare(fingerprint(), fingerprint(**change))
    assert not verdict.resumable and reason in "; ".join(verdict.reasons)


def test_sink_switches_follow_sparks_table() -> None:
    topic = {"kind": "topic", "target": "out", "mode": "append"}
    postgres = {"kind": "postgres", "target": "t", "mode": "update"}
    assert compare(fingerprint(), fingerprint(sink=topic)).resumable  # file -> Kafka: allowed
    assert not compare(fingerprint(sink=topic), fingerprint()).resumable  # Kafka -> file: no
    assert compare(fingerprint(sink=topic), fingerprint(sink=postgres)).resumable  # foreach
    moved = compare(fingerprint(sink=topic), fingerprint(sink={**topic, "target": "other"}))
    assert moved.resumable and moved.notes == ["output moves to other: it gets new results only"]
    widened = compare(
        fingerprint(sink=topic),
        fingerprint(sink=topic, output_schema=[["user", "string"], ["tally", "double"]]),
    )
    assert widened.resumable and widened.notes == ["the output schema changed; the sink accepts it"]


def test_normalised_definitions_ignore_ids_aliases_and_watermark_delays() -> None:
    one = "~Aggregate [window#14-T5000ms, user#0], [window#14-T5000ms, count(1) AS count#6L]"
    two = "Aggregate [window#99-T600000ms, user#7], [window#99-T600000ms, count(1) AS n#8L]"
    assert _normalise(one) == _normalise(two) == "Aggregate [window, user], [window, count(1)]"


def test_a_lake_table_takes_new_columns_but_not_removed_or_retyped_ones() -> None:
    """What a schema version adding a field does to a lake table: resumable, said so."""
    rules = {"family": "file", "keeps_schema": True, "fixed_location": True, "adds_columns": True}
    sink = {"kind": "table", "target": "/lake/t", "mode": "append", "rules": rules}
    old = fingerprint(sink=sink, stateful=[])
    wider = [["user", "string"], ["city", "string"], ["tally", "bigint"]]
    grown = compare(old, fingerprint(sink=sink, stateful=[], output_schema=wider))
    assert grown.resumable
    assert grown.notes == ["adds column(s) city string: rows written before read them as null"]
    retyped = [["user", "string"], ["tally", "double"]]
    assert not compare(old, fingerprint(sink=sink, stateful=[], output_schema=retyped)).resumable
    fewer = [["user", "string"]]
    assert not compare(old, fingerprint(sink=sink, stateful=[], output_schema=fewer)).resumable
