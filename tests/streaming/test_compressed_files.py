"""Gzipped JSON lines: a file cut short gives its whole lines and one quarantined record
with ``compression: gzip`` (a file of several gzip members gives them all); without it
Spark's reader fails the query, and the failure says what to do instead of being retried
forever."""

from __future__ import annotations

import gzip
import json
import re
import zlib
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from feeds import feed_project
from streamsmith.config import Trigger
from streamsmith.io.lake import read_table, table_path
from streamsmith.monitor.eventlog import read_events
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import PipelineError, run_pipeline


def lines_of(prefix: str, count: int) -> bytes:
    return b"".join(
        json.dumps({"id": f"{prefix}{n}", "n": n}).encode() + b"\n" for n in range(count)
    )


def whole_lines_before_the_cut(cut: bytes) -> tuple[list[str], str]:
    """What a reader can honestly take from ``cut``: the ids of its whole lines and the
    partial line after them (computed here with zlib alone, not with the code tested)."""
    data = zlib.decompressobj(wbits=31).decompress(cut)
    whole, _, tail = data.rpartition(b"\n")
    return [json.loads(line)["id"] for line in whole.splitlines()], tail.decode()


def test_a_gzip_file_cut_short_gives_its_whole_lines_and_one_quarantined_record(
    spark: SparkSession, tmp_path: Path
) -> None:
    folder = feed_project(tmp_path, "gz", schema="id string, n int", compression="gzip")
    (folder / "plain.jsonl").write_bytes(lines_of("p", 2) + b"\n   \n" + b'{"id": "broken\n')
    (folder / "whole.jsonl.gz").write_bytes(gzip.compress(lines_of("w", 3), mtime=0))
    two_members = gzip.compress(lines_of("m", 2), mtime=0) + gzip.compress(lines_of("k", 2))
    (folder / "joined.jsonl.gz").write_bytes(two_members)  # as `cat a.gz b.gz` makes
    packed = gzip.compress(lines_of("c", 2000), mtime=0)
    cut = packed[: len(packed) // 2]
    (folder / "cut.jsonl.gz").write_bytes(cut)
    survivors, tail = whole_lines_before_the_cut(cut)
    assert 0 < len(survivors) < 2000 and tail  # the cut falls inside a line

    app, pipeline = load_pipeline(tmp_path / "streamsmith.yml")
    run_pipeline(spark, build_plan(app, pipeline, Trigger("available-now")))

    root = tmp_path / "data"
    ids = [row.id for row in read_table(spark, table_path(root, "events")).collect()]
    whole = ["p0", "p1", "w0", "w1", "w2", "m0", "m1", "k0", "k1"]
    assert sorted(ids) == sorted([*whole, *survivors])
    rejects = read_table(spark, table_path(root, "events_quarantine"))
    found = {row.source_file.rsplit("/", 1)[-1]: row for row in rejects.collect()}
    assert sorted(found) == ["cut.jsonl.gz", "plain.jsonl"]  # the blank line is no record
    assert (
        found["cut.jsonl.gz"].reason == f"truncated gzip file: stream ends after {len(cut)} bytes"
    )
    assert found["cut.jsonl.gz"].raw == tail  # the partial line: all that is left of the rest
    assert found["plain.jsonl"].raw == '{"id": "broken'


def test_without_it_a_gzip_file_cut_short_stops_the_flow_saying_what_to_do(
    spark: SparkSession, tmp_path: Path
) -> None:
    folder = feed_project(tmp_path, "gzspark", schema="id string, n int")
    packed = gzip.compress(lines_of("c", 2000), mtime=0)
    (folder / "cut.jsonl.gz").write_bytes(packed[: len(packed) // 2])
    app, pipeline = load_pipeline(tmp_path / "streamsmith.yml")
    expected = f"{folder}/cut.jsonl.gz is a damaged gzip file (truncated gzip file: "
    hint = "set compression: gzip on source events to quarantine such a file"
    with pytest.raises(PipelineError, match=re.escape(expected) + ".*" + hint):
        run_pipeline(spark, build_plan(app, pipeline, Trigger("available-now")))
    events = read_events(tmp_path / "data", "gzspark")
    failures = [e for e in events if e["event"] == "failure" and e["query"] == "gzspark.events"]
    assert len(failures) == 1  # given up at once: a retry would fail again
    assert [e["event"] for e in events].count("gave_up") >= 1


def test_a_file_decoding_past_max_decompressed_mb_is_quarantined_as_too_large(
    spark: SparkSession, tmp_path: Path
) -> None:
    folder = feed_project(
        tmp_path, "gzcap", schema="id string, n int", compression="gzip", max_decompressed_mb=1
    )
    (folder / "small.jsonl.gz").write_bytes(gzip.compress(lines_of("s", 3), mtime=0))
    padding = b" " * (2 << 20)  # 2 MiB of blanks inflate past the 1 MiB cap
    (folder / "big.jsonl.gz").write_bytes(gzip.compress(lines_of("b", 1) + padding, mtime=0))

    app, pipeline = load_pipeline(tmp_path / "streamsmith.yml")
    run_pipeline(spark, build_plan(app, pipeline, Trigger("available-now")))

    root = tmp_path / "data"
    ids = sorted(row.id for row in read_table(spark, table_path(root, "events")).collect())
    assert ids == ["s0", "s1", "s2"]
    (reject,) = read_table(spark, table_path(root, "events_quarantine")).collect()
    assert reject.source_file.endswith("big.jsonl.gz")
    assert reject.reason.startswith(f"file too large: decompresses to more than {1 << 20} bytes")
