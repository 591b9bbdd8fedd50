"""The Kafka range cache: one consume per range, whole files only, cleanup by count and age."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from streamsmith.io.kafka.range_cache import KEY_FILE, RangeCache, default_dir

RANGES = "ranges"
KEY = {"range": ("ads", 0, 0, 6)}


def batches(log: list[str]) -> Iterator[pa.RecordBatch]:
    log.append("consumed")
    for first in (0, 3):
        yield pa.RecordBatch.from_pydict({"offset": pa.array(range(first, first + 3), pa.int64())})


def offsets(read: Iterator[pa.RecordBatch]) -> list[int]:
    return [value for batch in read for value in batch.column("offset").to_pylist()]


def test_readers_share_one_consume_and_the_last_deletes_the_file(tmp_path: Path) -> None:
    cache = RangeCache(group="ysb.flow", readers=3, folder=tmp_path / RANGES)
    log: list[str] = []

    assert offsets(cache.read(KEY, lambda: batches(log))) == list(range(6))
    assert len(list((tmp_path / RANGES).glob("*.arrow"))) == 1
    assert offsets(cache.read(KEY, lambda: batches(log))) == list(range(6))
    assert offsets(cache.read(KEY, lambda: batches(log))) == list(range(6))

    assert log == ["consumed"]  # the other two readers never touched the broker
    assert [p.name for p in (tmp_path / RANGES).iterdir()] == [KEY_FILE]


def test_a_reader_cut_off_early_still_leaves_the_whole_range(tmp_path: Path) -> None:
    cache = RangeCache(group="g", readers=2, folder=tmp_path / RANGES)
    log: list[str] = []
    read = cache.read(KEY, lambda: batches(log))
    next(read)
    read.close()  # the task was cut off after its first batch

    assert offsets(cache.read(KEY, lambda: batches(log))) == list(range(6))
    assert log == ["consumed"]
    assert not list((tmp_path / RANGES).glob("*.arrow"))


def test_a_failed_consume_is_not_kept(tmp_path: Path) -> None:
    cache = RangeCache(group="g", readers=2, folder=tmp_path / RANGES)

    def failing() -> Iterator[pa.RecordBatch]:
        yield pa.RecordBatch.from_pydict({"offset": pa.array([0], pa.int64())})
        raise RuntimeError("broker gone")

    with pytest.raises(RuntimeError, match="broker gone"):
        list(cache.read(KEY, failing))
    assert not [p for p in (tmp_path / RANGES).iterdir() if p.suffix in (".arrow", ".tmp")]


def test_groups_and_keys_do_not_mix(tmp_path: Path) -> None:
    log: list[str] = []
    one = RangeCache(group="app.one", readers=2, folder=tmp_path / RANGES)
    other = RangeCache(group="app.other", readers=2, folder=tmp_path / RANGES)
    list(one.read(KEY, lambda: batches(log)))
    list(other.read(KEY, lambda: batches(log)))
    list(one.read({"range": ("ads", 0, 0, 3)}, lambda: batches(log)))
    assert log == ["consumed"] * 3


def test_files_unused_for_the_ttl_are_swept(tmp_path: Path) -> None:
    cache = RangeCache(group="g", readers=2, folder=tmp_path / RANGES, ttl_s=60)
    log: list[str] = []
    list(cache.read(KEY, lambda: batches(log)))  # its second reader never comes
    (kept,) = (tmp_path / RANGES).glob("*.arrow")
    hour_ago = time.time() - 3600
    os.utime(kept, (hour_ago, hour_ago))

    list(cache.read({"range": ("ads", 1, 0, 6)}, lambda: batches(log)))

    assert not kept.exists()
    assert len(list((tmp_path / RANGES).glob("*.arrow"))) == 1  # the new range, waiting


def test_the_group_follows_the_first_planner_within_each_querys_own_limit(tmp_path: Path) -> None:
    cache = RangeCache(group="g", readers=2, folder=tmp_path / RANGES)
    start = {"ads": {"0": 0, "1": 0}}
    first = {"ads": {"0": 40, "1": 35}}

    assert cache.agreed_end(start, first) == first
    # A later query sees more data but cuts where the first did, so both read one range.
    assert cache.agreed_end(start, {"ads": {"0": 90, "1": 80}}) == first
    # One whose own limit (availableNow target, maxOffsetsPerTrigger) is lower keeps its own.
    assert cache.agreed_end(start, {"ads": {"0": 30, "1": 80}}) == {"ads": {"0": 30, "1": 80}}
    # Nothing new is never agreed on: the next call may see data.
    assert cache.agreed_end(first, first) == first
    assert cache.agreed_end(first, {"ads": {"0": 50, "1": 35}}) == {"ads": {"0": 50, "1": 35}}
    assert RangeCache(group="other", readers=2, folder=tmp_path / RANGES).agreed_end(
        start, {"ads": {"0": 90, "1": 80}}
    ) == {"ads": {"0": 90, "1": 80}}


def test_uncounted_readers_take_the_file_if_there_and_never_keep_one(tmp_path: Path) -> None:
    counted = RangeCache(group="ysb.flow", readers=2, folder=tmp_path / RANGES)
    side = RangeCache(group="ysb.flow", readers=2, folder=tmp_path / RANGES, counted=False)
    log: list[str] = []

    assert offsets(side.read(KEY, lambda: batches(log))) == list(range(6))  # before anyone
    assert log == ["consumed"] and not list((tmp_path / RANGES).glob("*.arrow"))  # no file written
    assert offsets(counted.read(KEY, lambda: batches(log))) == list(range(6))
    assert offsets(side.read(KEY, lambda: batches(log))) == list(range(6))  # from the file
    assert log == ["consumed", "consumed"]
    assert len(list((tmp_path / RANGES).glob("*.arrow"))) == 1  # the side read did not count
    assert offsets(counted.read(KEY, lambda: batches(log))) == list(range(6))
    assert not list((tmp_path / RANGES).glob("*.arrow"))


def test_the_cache_is_private_to_its_user_and_serves_only_what_it_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMSMITH_CACHE", str(tmp_path / "cache"))
    cache = RangeCache(group="g", readers=3)
    assert cache.folder == default_dir() == tmp_path / "cache" / "kafka-ranges"
    log: list[str] = []
    list(cache.read(KEY, lambda: batches(log)))
    (kept,) = cache.folder.glob("*.arrow")
    assert stat.S_IMODE(cache.folder.stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in cache.folder.iterdir()} == {0o600}

    # Records planted under the range's name (here: with the old MAC) are never served.
    planted = pa.RecordBatch.from_pydict({"offset": pa.array([666], pa.int64())})
    with pa.ipc.new_file(str(kept), planted.schema) as writer:
        writer.write_batch(planted)
    assert offsets(cache.read(KEY, lambda: batches(log))) == list(range(6))
    assert log == ["consumed", "consumed"]  # read again from the broker instead

    # Nor through a planted symlink, which is replaced, its target left alone.
    target = tmp_path / "target.arrow"
    target.write_bytes(b"theirs")
    kept.unlink()
    kept.symlink_to(target)
    assert offsets(cache.read(KEY, lambda: batches(log))) == list(range(6))
    assert target.read_bytes() == b"theirs"
    assert not kept.is_symlink()


def test_the_cache_refuses_a_folder_open_to_others(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    cache = RangeCache(group="g", readers=2, folder=shared)
    with pytest.raises(PermissionError, match="open to other users"):
        list(cache.read(KEY, lambda: batches([])))
    with pytest.raises(PermissionError, match="open to other users"):
        cache.agreed_end({"t": {"0": 0}}, {"t": {"0": 5}})
