"""How far a file source is behind: the files in its directory it has not processed yet.

Spark's file source keeps the files each batch read in the query's checkpoint
(``sources/0/<batch>``, JSON lines after a version line, compacted every few batches
into ``<batch>.compact``). Comparing that with a listing of the input directory gives
the backlog in files and bytes. (Kafka lag needs no listing: the progress carries the
latest and processed offsets; see ``streamsmith.monitor.progress``.)
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse


@dataclass(frozen=True)
class FileBacklog:
    files: int
    bytes: int


@dataclass(frozen=True)
class FileSourceProbe:
    """Where a query's file source reads, and where its checkpoint logs what it read."""

    directory: Path
    checkpoint: Path
    glob: str | None = None
    recursive: bool = True

    def backlog(self) -> FileBacklog:
        """Files (and bytes) in the directory that no batch has read yet."""
        done = processed_files(self.checkpoint / "sources" / "0")
        files = total = 0
        for path in self._listing():
            if str(path) not in done:
                files += 1
                total += path.stat().st_size
        return FileBacklog(files, total)

    def _listing(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        found = self.directory.rglob("*") if self.recursive else self.directory.glob("*")
        return [
            path
            for path in found
            if path.is_file()
            # hidden files and folders (a lake table's _spark_metadata) hold no input
            and not any(
                part.startswith((".", "_")) for part in path.relative_to(self.directory).parts
            )
            and (self.glob is None or fnmatch.fnmatch(path.name, self.glob))
        ]


def processed_files(source_log: Path) -> set[str]:
    """Local paths of every file the file-source log records as read."""
    if not source_log.is_dir():
        return set()
    entries = [p for p in source_log.iterdir() if p.name.split(".")[0].isdigit()]
    compacts = [p for p in entries if p.name.endswith(".compact")]
    start = max((int(p.name.split(".")[0]) for p in compacts), default=-1)
    paths: set[str] = set()
    for log_file in entries:
        batch = int(log_file.name.split(".")[0])
        if batch < start or (batch == start and not log_file.name.endswith(".compact")):
            continue
        for line in log_file.read_text(encoding="utf-8").splitlines()[1:]:
            if line.strip():
                paths.add(unquote(urlparse(json.loads(line)["path"]).path))
    return paths
