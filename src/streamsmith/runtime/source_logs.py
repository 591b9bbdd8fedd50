"""Spark's own logs in a query's checkpoint, read from the driver: the offset log (where
each micro-batch starts and ends, and its watermark) and a file source's log (which files
each log id took). streamsmith's side queries use them to line their batches up with the
flow query's (``late``, ``clean_input``). Their format is Spark's, stable across 3.x and
4.x: a version line, then JSON.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pyspark.sql import Column
from pyspark.sql import functions as F


def offset_log_entry(file: Path) -> tuple[int, tuple[str, ...]] | None:
    """(batch watermark ms, source offsets) of one offset-log file, None while unwritten."""
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    if len(lines) < 3:  # version, metadata, then one line per source
        return None
    metadata = json.loads(lines[1])
    return int(metadata.get("batchWatermarkMs", 0)), tuple(lines[2:])


@dataclass
class FileSourceLog:
    """The file source's log in a query's checkpoint: the log id that took each file.

    Spark writes one file per log id and, every ``compactInterval`` ids, a compact file
    holding every entry so far. Each file is read once, and of a compact file only the
    entries past those already read: a call costs what is new, not the whole history."""

    checkpoint: Path
    _ids: dict[str, int] = field(default_factory=dict)
    _by_id: dict[int, list[str]] = field(default_factory=dict)
    _upto: int = -1  # every log id up to this one is read

    def ids(self) -> dict[str, int]:
        """File -> log id."""
        self._read_new()
        return self._ids

    def files_of(self, first: int, last: int) -> list[str]:
        """The files of log ids ``first`` to ``last``."""
        self._read_new()
        return [file for log_id in range(first, last + 1) for file in self._by_id.get(log_id, ())]

    def forget_through(self, log_id: int) -> None:
        """Drop the entries of log ids up to ``log_id``: the caller will not ask again."""
        for old in [found for found in self._by_id if found <= log_id]:
            for file in self._by_id.pop(old):
                if self._ids.get(file) == old:
                    del self._ids[file]

    def _read_new(self) -> None:
        folder = self.checkpoint / "sources" / "0"
        if not folder.is_dir():
            return
        new = sorted(
            (int(stem), name)
            for name in os.listdir(folder)
            if (stem := name.removesuffix(".compact")).isdigit() and int(stem) > self._upto
        )
        compacts = [index for index, (_, name) in enumerate(new) if name.endswith(".compact")]
        for number, name in new[compacts[-1] :] if compacts else new:
            try:
                lines = (folder / name).read_text(encoding="utf-8").splitlines()[1:]
            except FileNotFoundError:  # compacted away since listed: the next call reads on
                return
            entries = []
            for line in reversed(lines):  # a compact file lists every id so far, in order
                record = json.loads(line)
                if int(record["batchId"]) <= self._upto:
                    break
                entries.append(record)
            for record in reversed(entries):
                path, log_id = normal_path(record["path"]), int(record["batchId"])
                self._ids[path] = log_id
                self._by_id.setdefault(log_id, []).append(path)
            self._upto = number

    def batch_files(self, batch_id: int) -> list[str] | None:
        """The files micro-batch ``batch_id`` of this query reads; None if its offset log
        no longer says (or never said) where the batch starts and ends."""
        end = self.log_offset(batch_id)
        start = self.log_offset(batch_id - 1) if batch_id > 0 else -1
        if start is None or end is None:
            return None
        return self.files_of(start + 1, end)

    def batch_ends(self) -> list[tuple[int, int]]:
        """(batch id, last log id read) of each batch in the offset log, in order."""
        batches = sorted(int(file.name) for file in (self.checkpoint / "offsets").glob("[0-9]*"))
        return [(batch, end) for batch in batches if (end := self.log_offset(batch)) is not None]

    def log_offset(self, batch_id: int) -> int | None:
        entry = offset_log_entry(self.checkpoint / "offsets" / str(batch_id))
        if entry is None or len(entry[1]) != 1:
            return None
        return log_offset(entry[1][0])


def kafka_offsets(checkpoint: Path, batch_id: int) -> dict[tuple[str, int], int] | None:
    """The end offsets of a Kafka-fed query's batch (``{(topic, partition): offset}``),
    None while unwritten or when the query reads another kind or several sources."""
    entry = offset_log_entry(checkpoint / "offsets" / str(batch_id))
    if entry is None or len(entry[1]) != 1:
        return None
    document = json.loads(entry[1][0])
    if not isinstance(document, dict) or "logOffset" in document:
        return None
    try:
        return {
            (str(topic), int(partition)): int(offset)
            for topic, partitions in document.items()
            for partition, offset in partitions.items()
        }
    except (AttributeError, TypeError, ValueError):
        return None


def log_offset(value: Any) -> int | None:
    """A file source's offset (``{"logOffset": N}``, as JSON text or parsed) as N."""
    if isinstance(value, str):
        value = json.loads(value)
    if isinstance(value, dict) and "logOffset" in value:
        return int(value["logOffset"])
    return None


def normal_path(path: str) -> str:
    """One spelling of a local file's URI (``file:/x`` and ``file:///x`` alike: ``/x``),
    still URI-encoded, as Spark writes both."""
    parts = urlsplit(path)
    return parts.path if parts.scheme == "file" else path


def normal_path_column(column: Column) -> Column:
    """:func:`normal_path` of a column of file URIs (``_metadata.file_path``)."""
    return F.regexp_replace(column, "^file:(//)?(?=/)", "")
