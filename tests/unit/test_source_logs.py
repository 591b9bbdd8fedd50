"""Reading a file source's log in a query's checkpoint: each entry once, whatever Spark
compacts."""

from __future__ import annotations

import json
from pathlib import Path

from streamsmith.runtime.source_logs import FileSourceLog


def write_log(folder: Path, name: str, ids: range, per_id: int = 2) -> None:
    """One log file (``N`` or ``N.compact``) with ``per_id`` files for each id."""
    lines = [
        json.dumps({"path": f"file:///in/{i}-{k}.json", "timestamp": i, "batchId": i})
        for i in ids
        for k in range(per_id)
    ]
    (folder / name).write_text("v1\n" + "\n".join(lines), encoding="utf-8")


def test_a_compact_file_adds_only_the_entries_not_read_before(tmp_path: Path) -> None:
    folder = tmp_path / "sources" / "0"
    folder.mkdir(parents=True)
    for i in range(9):
        write_log(folder, str(i), range(i, i + 1))
    log = FileSourceLog(tmp_path)
    assert len(log.ids()) == 18
    # Spark writes id 9 as a compact file holding ids 0 to 9, then deletes the others.
    write_log(folder, "9.compact", range(10))
    for i in range(9):
        (folder / str(i)).unlink()
    write_log(folder, "10", range(10, 11))
    assert log.files_of(9, 10) == ["/in/9-0.json", "/in/9-1.json", "/in/10-0.json", "/in/10-1.json"]
    assert log.files_of(0, 0) == ["/in/0-0.json", "/in/0-1.json"]  # not doubled
    assert len(log.ids()) == 22

    # A fresh reader starts at the newest compact file and reads what follows.
    again = FileSourceLog(tmp_path)
    assert again.ids() == log.ids()

    log.forget_through(9)
    assert log.files_of(0, 10) == ["/in/10-0.json", "/in/10-1.json"]
    assert log.ids() == {"/in/10-0.json": 10, "/in/10-1.json": 10}
