"""Spark's own logs in a query's checkpoint, read from the driver: the offset log (where
each micro-batch starts and ends, and its watermark) and a file source's log (which files
each log id took). streamsmith's side queries use them to line their batches up with the
flow query's (``late``, ``clean_input``). Their format is Spark's, stable across 3.x and
4.x: a version line, then JSON.
"""

from __future__ import annotations

import json
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
    """The file source's log in a query's checkpoint: the log id that took each file."""

    checkpoint: Path
    _ids: dict[str, int] = field(default_factory=dict)
    _read: set[str] = field(default_factory=set)

    def ids(self) -> dict[str, int]:
        """File -> log id (log files never change once written, so each is read once)."""
        folder = self.checkpoint / "sources" / "0"
        if not folder.is_dir():
            return self._ids
        for entry in sorted(folder.iterdir()):
            if entry.name in self._read or entry.name.startswith("."):
                continue
            try:
                lines = entry.read_text(encoding="utf-8").splitlines()[1:]
            except FileNotFoundError:  # a delta file removed after compaction
                continue
            for line in lines:
                record = json.loads(line)
                self._ids[normal_path(record["path"])] = int(record["batchId"])
            self._read.add(entry.name)
        return self._ids

    def batch_files(self, batch_id: int) -> list[str] | None:
        """The files micro-batch ``batch_id`` of this query reads; None if its offset log
        no longer says (or never said) where the batch starts and ends."""
        end = self.log_offset(batch_id)
        start = self.log_offset(batch_id - 1) if batch_id > 0 else -1
        if start is None or end is None:
            return None
        return [path for path, log_id in self.ids().items() if start < log_id <= end]

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
