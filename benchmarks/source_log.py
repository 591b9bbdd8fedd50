"""What reading a file source's log costs the driver as the files read pile up.

streamsmith reads Spark's file source log in a query's checkpoint (which log id took
each file) to line side queries up with the flow's query and to archive read files.
Spark keeps one entry per file ever read: every ``compactInterval`` (10) log ids it
writes a compact file holding them all. For each history size N this script writes such
a log (one file per log id, as one file per micro-batch) and prints:

- ``cold ms``: reading it from nothing, as each start does (and as streamsmith did at
  every compact file before it read only the entries past those it had);
- ``next ms`` / ``compact ms``: taking in one more log id, a plain one and a compact one
  (the median of 10 each), as a running query's driver does per micro-batch;
- ``KB held``: the memory the reader keeps (``tracemalloc``), per reader.

    .venv/bin/python benchmarks/source_log.py --entries 1000,20000,200000
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from streamsmith.runtime.source_logs import FileSourceLog

COMPACT_INTERVAL = 10  # spark.sql.streaming.fileSource.log.compactInterval's default


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", default="1000,20000,200000", help="history sizes")
    args = parser.parse_args()
    print(f"{'entries':>8} {'log KB':>7} {'cold ms':>8} {'next ms':>8} {'compact ms':>10} "
          f"{'KB held':>8}")  # fmt: skip
    for size in (int(n) for n in args.entries.split(",")):
        with tempfile.TemporaryDirectory(prefix="source-log-") as tmp:
            checkpoint = Path(tmp)
            folder = checkpoint / "sources" / "0"
            folder.mkdir(parents=True)
            write_history(folder, size)
            log_kb = sum(f.stat().st_size for f in folder.iterdir()) / 1024
            started = time.perf_counter()
            log = FileSourceLog(checkpoint)
            log.ids()
            cold = (time.perf_counter() - started) * 1000
            tracemalloc.start()
            traced = FileSourceLog(checkpoint)  # measured apart: tracing slows reading
            traced.ids()
            held = tracemalloc.get_traced_memory()[0] / 1024
            tracemalloc.stop()
            del traced
            plain, compact = [], []
            for log_id in range(size, size + 2 * COMPACT_INTERVAL):
                write_id(folder, log_id)
                started = time.perf_counter()
                assert log.files_of(log_id, log_id) == [entry_path(log_id)]
                elapsed = (time.perf_counter() - started) * 1000
                (compact if is_compact(log_id) else plain).append(elapsed)
            print(f"{size:>8} {log_kb:>7.0f} {cold:>8.1f} {statistics.median(plain):>8.2f} "
                  f"{statistics.median(compact):>10.2f} {held:>8.0f}", flush=True)  # fmt: skip


def entry_path(log_id: int) -> str:
    return f"/data/inbox/events-{log_id:09d}.json"


def is_compact(log_id: int) -> bool:
    return (log_id + 1) % COMPACT_INTERVAL == 0


def line(log_id: int) -> str:
    return json.dumps(
        {"path": f"file://{entry_path(log_id)}", "timestamp": log_id, "batchId": log_id}
    )


def write_history(folder: Path, size: int) -> None:
    """Log ids 0 to size - 1 as Spark leaves them: the newest compact file, then the
    plain files after it (older ones are deleted once compacted)."""
    last_compact = max((i for i in range(size) if is_compact(i)), default=-1)
    if last_compact >= 0:
        lines = "\n".join(line(i) for i in range(last_compact + 1))
        (folder / f"{last_compact}.compact").write_text(f"v1\n{lines}", encoding="utf-8")
    for log_id in range(last_compact + 1, size):
        write_id(folder, log_id)


def write_id(folder: Path, log_id: int) -> None:
    """One more log id; a compact one holds every id so far, as Spark writes it."""
    if not is_compact(log_id):
        (folder / str(log_id)).write_text(f"v1\n{line(log_id)}", encoding="utf-8")
        return
    previous = sorted(folder.glob("*.compact"))
    lines = "\n".join(line(i) for i in range(log_id + 1))
    (folder / f"{log_id}.compact").write_text(f"v1\n{lines}", encoding="utf-8")
    for old in previous:
        old.unlink()


if __name__ == "__main__":
    main()
