"""The bytes of one input file -> its text or lines, gzipped or not, damage reported.

Pure Python (no Spark), so the schema sampler and the supervisor use it too. Spark's
file readers fail the whole query on a gzip file cut short; decoding here instead keeps
what precedes the damage and says what the damage is, for the quarantine.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path
from urllib.parse import unquote, urlparse

_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 16  # compressed bytes decoded at a time
_OUT_CHUNK = 1 << 20  # decoded bytes produced at a time (a chunk of a bomb inflates ~1000x)
MAX_DECOMPRESSED_BYTES = 256 << 20
"""The default cap on one file's decompressed size (256 MiB; a source's
``max_decompressed_mb``): a file that inflates past it is quarantined as too large
instead of taking unbounded memory in a decoder."""
# Deflate inflates at most about 1,032 times: a gzip file smaller than the cap divided by
# this cannot pass the cap, so only larger ones are measured before they are kept.
_MAX_RATIO = 1032
_UNREADABLE = re.compile(
    r"FAILED_READ_FILE\S*\] Encountered error while reading file (file:\S+?\.gz)\.\s"
)


def decode_document(
    content: bytes, *, max_bytes: int = MAX_DECOMPRESSED_BYTES
) -> tuple[str, str | None]:
    """Bytes of one file -> ``(text, error)``; gzip is detected by its magic number.

    On failure the text is what could be decoded before the error (for the quarantine's
    raw payload) and the error says what went wrong and at which byte.
    """
    data, error = _decompressed(content, max_bytes)
    if error is not None:
        return data.decode("utf-8", errors="replace"), error
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return data.decode("utf-8", errors="replace"), f"not UTF-8 text at byte {exc.start}"


def decode_lines(
    content: bytes, *, skip_blank: bool, max_bytes: int = MAX_DECOMPRESSED_BYTES
) -> list[tuple[str, str | None]]:
    """Bytes of one JSON-lines or text file -> its lines as ``(text, error)``.

    Lines end as Spark's text reader ends them (``\\n``, ``\\r\\n`` or ``\\r``). A
    gzip stream cut short or corrupt gives every line before the damage, then one
    ``(the decodable tail, why)``: the lines after it were never readable. A file that
    decompresses past ``max_bytes`` gives one ``("", "file too large: ...")``. A line that is
    not UTF-8 comes with its invalid bytes as U+FFFD and the reason, so one bad line
    costs itself only. ``skip_blank`` leaves out blank lines, as Spark's JSON reader does.
    """
    data, error = _decompressed(content, max_bytes)
    tail = b""
    if error is not None:
        end = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
        data, tail = data[:end], data[end:]
    lines: list[tuple[str, str | None]] = []
    for line in data.splitlines():
        if skip_blank and not line.strip():
            continue
        try:
            lines.append((line.decode("utf-8"), None))
        except UnicodeDecodeError as exc:
            text = line.decode("utf-8", errors="replace")
            lines.append((text, f"not UTF-8 text at byte {exc.start} of the line"))
    if error is not None:
        lines.append((tail.decode("utf-8", errors="replace"), error))
    return lines


def _decompressed(content: bytes, max_bytes: int) -> tuple[bytes, str | None]:
    """``content`` gunzipped if it starts with gzip's magic number: ``(data, error)``.

    Every member is decoded, as ``gzip`` and ``zcat`` do: ``cat a.gz b.gz``, log shippers
    and rotated logs make files of several. The data decoded before a corruption or a cut
    is kept; a file that decompresses to more than ``max_bytes`` (a gzip bomb) gives no
    data and says so. A file that could pass ``max_bytes`` is first measured with its
    output thrown away chunk by chunk, so refusing a bomb holds only its compressed bytes
    and one chunk, never ``max_bytes``.
    """
    if content[:2] != _GZIP_MAGIC:
        return content, None
    if len(content) * _MAX_RATIO > max_bytes and _inflate(content, max_bytes, keep=False)[0]:
        return b"", _too_large(max_bytes)
    too_large, data, error = _inflate(content, max_bytes, keep=True)
    return (b"", _too_large(max_bytes)) if too_large else (data, error)


def _inflate(content: bytes, max_bytes: int, *, keep: bool) -> tuple[bool, bytes, str | None]:
    """Every gzip member of ``content`` decoded: ``(past max_bytes, data, error)``; the
    data only when ``keep`` (else each chunk is dropped once counted)."""
    parts: list[bytes] = []
    size = 0
    decompressor = zlib.decompressobj(wbits=31)
    pending = b""  # compressed bytes fed but not yet decoded (the output limit stopped it)
    fed = 0  # compressed bytes taken from ``content``
    while True:
        if not pending and fed < len(content):
            pending, fed = content[fed : fed + _CHUNK], min(fed + _CHUNK, len(content))
        try:  # in steps, to keep what precedes damage and to stop a bomb early
            data = decompressor.decompress(pending, min(_OUT_CHUNK, max_bytes - size + 1))
        except zlib.error as exc:
            damage = f"corrupt gzip data after byte {fed - len(pending)} ({exc})"
            return False, b"".join(parts), damage
        if keep:
            parts.append(data)
        size += len(data)
        if size > max_bytes:
            return True, b"", None
        pending = decompressor.unconsumed_tail
        if not (data or pending or fed < len(content) or decompressor.eof):
            break  # all input taken, nothing more comes out: the stream was cut short
        if decompressor.eof:  # a member ends: another may follow (gzip allows zero padding)
            at = fed - len(decompressor.unused_data)
            while at < len(content) and content[at] == 0:
                at += 1
            if at == len(content):
                return False, b"".join(parts), None
            if content[at : at + 2] != _GZIP_MAGIC:
                damage = f"data after the gzip stream at byte {at} is not gzip"
                return False, b"".join(parts), damage
            decompressor = zlib.decompressobj(wbits=31)
            pending, fed = b"", at
    damage = f"truncated gzip file: stream ends after {len(content)} bytes"
    return False, b"".join(parts), damage


def _too_large(max_bytes: int) -> str:
    return (
        f"file too large: decompresses to more than {max_bytes} bytes (the source's "
        "max_decompressed_mb; a gzip bomb is refused rather than held in memory)"
    )


_UNREADABLE = re.compile(
    r"FAILED_READ_FILE\S*\] Encountered error while reading file (file:\S+?\.gz)\.\s"
)


def damaged_gzip(error: str) -> tuple[Path, str] | None:
    """The local gzip file a query failed to read and what is wrong with it, when that
    file is damaged (cut short or corrupt: reading it again fails again); None for any
    other error."""
    found = _UNREADABLE.search(error)
    if found is None:
        return None
    path = Path(unquote(urlparse(found.group(1)).path))
    try:
        content = path.read_bytes()
    except OSError:  # gone or unreadable now: the error may not be the file's
        return None
    _, damage = _decompressed(content, MAX_DECOMPRESSED_BYTES)
    return None if damage is None else (path, damage)
