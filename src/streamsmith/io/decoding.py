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
_UNREADABLE = re.compile(
    r"FAILED_READ_FILE\S*\] Encountered error while reading file (file:\S+?\.gz)\.\s"
)


def decode_document(content: bytes) -> tuple[str, str | None]:
    """Bytes of one file -> ``(text, error)``; gzip is detected by its magic number.

    On failure the text is what could be decoded before the error (for the quarantine's
    raw payload) and the error says what went wrong and at which byte.
    """
    data, error = _decompressed(content)
    if error is not None:
        return data.decode("utf-8", errors="replace"), error
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return data.decode("utf-8", errors="replace"), f"not UTF-8 text at byte {exc.start}"


def decode_lines(content: bytes, *, skip_blank: bool) -> list[tuple[str, str | None]]:
    """Bytes of one JSON-lines or text file -> its lines as ``(text, error)``.

    Lines end as Spark's text reader ends them (``\\n``, ``\\r\\n`` or ``\\r``). A
    gzip stream cut short or corrupt gives every line before the damage, then one
    ``(the decodable tail, why)``: the lines after it were never readable. A line that is
    not UTF-8 comes with its invalid bytes as U+FFFD and the reason, so one bad line
    costs itself only. ``skip_blank`` leaves out blank lines, as Spark's JSON reader does.
    """
    data, error = _decompressed(content)
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


def _decompressed(content: bytes) -> tuple[bytes, str | None]:
    """``content`` gunzipped if it starts with gzip's magic number: ``(data, error)``,
    with the data decoded before a corruption or a cut kept."""
    if content[:2] != _GZIP_MAGIC:
        return content, None
    decompressor = zlib.decompressobj(wbits=31)
    parts: list[bytes] = []
    for start in range(0, len(content), _CHUNK):  # in steps, to keep what precedes damage
        try:
            parts.append(decompressor.decompress(content[start : start + _CHUNK]))
        except zlib.error as exc:
            return b"".join(parts), f"corrupt gzip data after byte {start} ({exc})"
        if decompressor.eof:
            break
    parts.append(decompressor.flush())
    if not decompressor.eof:
        message = f"truncated gzip file: stream ends after {len(content)} bytes"
        return b"".join(parts), message
    return b"".join(parts), None


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
    _, damage = _decompressed(content)
    return None if damage is None else (path, damage)
