"""A late-events query following its flow's batch boundaries (offset logs written as
Spark writes them: version, metadata, one line per source)."""

from __future__ import annotations

import json
from pathlib import Path

from streamsmith.io.kafka.follow import followed_end


def offsets(a: int, b: int) -> dict[str, dict[str, int]]:
    return {"ads": {"0": a, "1": b}}


def flow_planned(checkpoint: Path, *ends: dict[str, dict[str, int]]) -> None:
    log = checkpoint / "offsets"
    log.mkdir(parents=True, exist_ok=True)
    for batch, end in enumerate(ends):
        metadata = {"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}}
        (log / str(batch)).write_text(f"v1\n{json.dumps(metadata)}\n{json.dumps(end)}\n")


def test_each_batch_ends_where_the_flows_batch_from_the_same_start_ended(tmp_path: Path) -> None:
    latest = offsets(500, 500)
    assert followed_end(tmp_path, offsets(0, 0), latest) == offsets(0, 0)  # flow not started

    flow_planned(tmp_path, offsets(40, 30), offsets(40, 30), offsets(90, 75))  # 1: no-data
    assert followed_end(tmp_path, offsets(0, 0), latest) == offsets(40, 30)
    assert followed_end(tmp_path, offsets(40, 30), latest) == offsets(90, 75)
    assert followed_end(tmp_path, offsets(90, 75), latest) == offsets(90, 75)  # wait for it
    # Never past what this query itself sees as the end: it waits instead.
    assert followed_end(tmp_path, offsets(40, 30), offsets(80, 80)) == offsets(40, 30)


def test_batches_the_flow_never_cut_are_planned_independently(tmp_path: Path) -> None:
    flow_planned(tmp_path, offsets(40, 30), offsets(90, 75))
    own = offsets(120, 100)
    assert followed_end(tmp_path, offsets(60, 50), own) == own
