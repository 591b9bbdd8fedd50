"""Files streamsmith decodes itself (``compression: gzip``): lines, damage, the spec key."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from pathlib import Path

import pytest
from pydantic import ValidationError

from streamsmith.config import SourceSpec
from streamsmith.io.decoding import (
    MAX_DECOMPRESSED_BYTES,
    damaged_gzip,
    decode_document,
    decode_lines,
)

TEXT = b'{"a": 1}\r\n{"a": 2}\n\n  \n{"a": 3}\r{"a": 4}'


def test_lines_end_as_sparks_text_reader_ends_them_plain_or_gzipped() -> None:
    expected = [('{"a": 1}', None), ('{"a": 2}', None), ('{"a": 3}', None), ('{"a": 4}', None)]
    assert decode_lines(TEXT, skip_blank=True) == expected
    assert decode_lines(gzip.compress(TEXT), skip_blank=True) == expected
    assert [text for text, _ in decode_lines(TEXT, skip_blank=False)].count("") == 1
    assert decode_lines(b"", skip_blank=True) == []


def test_a_gzip_file_cut_short_keeps_its_whole_lines_and_says_where_it_ends() -> None:
    payload = b"".join(b'{"n": %d}\n' % n for n in range(5000))
    packed = gzip.compress(payload, mtime=0)
    cut = packed[: len(packed) // 3]
    lines = decode_lines(cut, skip_blank=True)
    *whole, (tail, error) = lines
    assert error == f"truncated gzip file: stream ends after {len(cut)} bytes"
    assert whole == [(f'{{"n": {n}}}', None) for n in range(len(whole))] and whole
    assert f'{{"n": {len(whole)}}}'.startswith(tail)  # the partial line, as payload


def test_corrupt_gzip_data_keeps_what_came_before_it() -> None:
    packed = bytearray(gzip.compress(b"".join(b"line %d\n" % n for n in range(50_000)), mtime=0))
    packed[len(packed) // 2 : len(packed) // 2 + 64] = b"\xff" * 64
    *whole, (_, error) = decode_lines(bytes(packed), skip_blank=True)
    assert error is not None and error.startswith("corrupt gzip data after byte")
    assert whole and whole[0] == ("line 0", None) and all(e is None for _, e in whole)


def test_every_member_of_a_multi_member_gzip_file_is_decoded() -> None:
    first = b"".join(b'{"n": %d}\n' % n for n in range(3))
    second = b"".join(b'{"n": %d}\n' % n for n in range(3, 200_000))  # past one chunk
    joined = gzip.compress(first, mtime=0) + gzip.compress(second, mtime=0) + b"\0" * 8
    expected = [(f'{{"n": {n}}}', None) for n in range(200_000)]
    assert gzip.decompress(joined) == first + second  # what `cat a.gz b.gz | zcat` gives
    assert decode_lines(joined, skip_blank=True) == expected
    assert decode_document(joined) == ((first + second).decode(), None)


def test_data_after_the_last_gzip_member_that_is_not_gzip_is_reported() -> None:
    packed = gzip.compress(b"a\nb\n", mtime=0)
    assert decode_lines(packed + b"garbage", skip_blank=True) == [
        ("a", None),
        ("b", None),
        ("", f"data after the gzip stream at byte {len(packed)} is not gzip"),
    ]


def test_a_gzip_bomb_is_refused_as_too_large_without_inflating_it_whole() -> None:
    bomb = gzip.compress(b"\0" * 10_000_000, mtime=0)  # about 10 KB -> 10 MB
    refused = "file too large: decompresses to more than 1000000 bytes"
    [(raw, error)] = decode_lines(bomb, skip_blank=True, max_bytes=1_000_000)
    assert raw == "" and error is not None and error.startswith(refused)
    text, error = decode_document(bomb + bomb, max_bytes=15_000_000)  # counted across members
    assert text == "" and error is not None and error.startswith("file too large")
    assert decode_document(bomb, max_bytes=10_000_000) == ("\0" * 10_000_000, None)


def test_a_line_that_is_not_utf8_costs_itself_only() -> None:
    lines = decode_lines(b'{"a": "ok"}\n{"a": "\xff"}\n{"a": "fine"}\n', skip_blank=True)
    assert lines == [
        ('{"a": "ok"}', None),
        ('{"a": "\ufffd"}', "not UTF-8 text at byte 7 of the line"),
        ('{"a": "fine"}', None),
    ]


def test_a_damaged_gzip_file_named_by_sparks_error_is_found(tmp_path: Path) -> None:
    packed = gzip.compress(b'{"a": 1}\n' * 1000, mtime=0)
    (tmp_path / "cut.jsonl.gz").write_bytes(packed[:40])
    (tmp_path / "whole.jsonl.gz").write_bytes(packed)

    def error(name: str) -> str:
        return (
            "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
            f"file://{tmp_path}/{name}.  SQLSTATE: KD001"
        )

    assert damaged_gzip(error("cut.jsonl.gz")) == (
        tmp_path / "cut.jsonl.gz",
        "truncated gzip file: stream ends after 40 bytes",
    )
    assert damaged_gzip(error("whole.jsonl.gz")) is None  # another cause: retried as usual
    assert damaged_gzip(error("gone.jsonl.gz")) is None
    assert damaged_gzip("[DIVIDE_BY_ZERO] Division by zero") is None


def test_compression_is_for_json_lines_and_text() -> None:
    spec = SourceSpec.model_validate({"format": "jsonl", "path": "in", "compression": "gzip"})
    assert spec.decodes_files and spec.reads_raw_json
    with pytest.raises(ValidationError, match="compression: gzip is for jsonl and text files"):
        SourceSpec.model_validate({"format": "csv", "path": "in", "compression": "gzip"})


def test_schema_inference_samples_the_whole_lines_of_a_damaged_gzip_file(tmp_path: Path) -> None:
    from streamsmith.io.schema_store import file_sample

    packed = gzip.compress(b"".join(b'{"n": %d}\n' % n for n in range(5000)), mtime=0)
    (tmp_path / "a.jsonl.gz").write_bytes(packed[: len(packed) // 2])
    (tmp_path / "b.jsonl").write_text('{"n": 1, "s": "x"}\n')
    records = file_sample(tmp_path, None).records
    assert 0 < len(records) < 5001 and records[-1] == ("b.jsonl:1", {"n": 1, "s": "x"})


def _zeros_gzipped(size: int) -> bytes:
    """``size`` zero bytes gzipped (about a thousandth of it), made a MiB at a time."""
    packer = zlib.compressobj(wbits=31)
    parts = [packer.compress(bytes(1 << 20)) for _ in range(size >> 20)]
    return b"".join([*parts, packer.flush()])


@pytest.mark.parametrize("decode", ["lines", "document"])
def test_a_gzip_bomb_is_refused_in_bounded_memory(decode: str) -> None:
    """Refusing a bomb holds its compressed bytes and a chunk, never up to the cap."""
    bomb = _zeros_gzipped(256 << 20)  # 256 KB -> 256 MiB
    tracemalloc.start()
    try:
        if decode == "lines":
            [(text, error)] = decode_lines(bomb, skip_blank=True, max_bytes=64 << 20)
        else:
            text, error = decode_document(bomb, max_bytes=64 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert text == "" and error is not None and error.startswith("file too large")
    assert peak < 4 << 20, f"peak {peak >> 20} MiB"


def test_the_decompressed_cap_is_a_source_setting_with_a_modest_default() -> None:
    default = SourceSpec(format="jsonl", path="in", compression="gzip")
    assert default.max_decompressed_mb == 256 == MAX_DECOMPRESSED_BYTES >> 20
    small = SourceSpec(format="jsonl", path="in", compression="gzip", max_decompressed_mb=1)
    assert small.max_decompressed_mb == 1
    with pytest.raises(ValidationError, match="max_decompressed_mb"):
        SourceSpec(format="jsonl", path="in", compression="gzip", max_decompressed_mb=0)
