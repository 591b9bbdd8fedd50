"""What a file source's folder costs each micro-batch as it fills: Spark lists it whole.

For each folder size N, a folder of N small JSON-lines files is read by one streaming
query (Spark's file source, recursive lookup, as streamsmith reads ``jsonl``) in a first
batch; then one new file is dropped at a time, each read in a micro-batch of its own.
The script prints the median ``latestOffset`` time (Spark's listing of the folder and
its choice of new files) and the median whole batch over those one-file batches: the
cost every query reading the source pays per trigger, which a source's ``archive`` keeps
at its smallest size by moving read files out.

    .venv/bin/python benchmarks/file_listing.py --files 100,2000,20000
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from streamsmith.testing import local_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="100,2000,20000", help="folder sizes, comma-separated")
    parser.add_argument("--batches", type=int, default=30, help="one-file batches measured")
    args = parser.parse_args()
    spark = local_session()
    print(f"{'files':>7} {'listing ms':>10} {'batch ms':>9}  (medians of {args.batches} batches)")
    for size in (int(n) for n in args.files.split(",")):
        with tempfile.TemporaryDirectory(prefix="listing-") as tmp:
            folder = Path(tmp) / "in"
            folder.mkdir()
            for number in range(size):
                (folder / f"f{number:07d}.json").write_text('{"n": 1}\n')
            listing, batch = measure(spark, folder, Path(tmp) / "ckpt", size, args.batches)
            print(f"{size:>7} {listing:>10.0f} {batch:>9.0f}", flush=True)
            shutil.rmtree(folder)


def measure(spark, folder: Path, checkpoint: Path, size: int, batches: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Median latestOffset and batch ms over ``batches`` one-file batches."""
    query = (
        spark.readStream.format("json").schema("n int").option("recursiveFileLookup", "true")
        .load(str(folder)).writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint)).trigger(processingTime="0 seconds").start()
    )  # fmt: skip
    try:
        wait_for_batch(query, 0)
        for number in range(batches):
            staging = folder.parent / f"new-{number}.tmp"
            staging.write_text('{"n": 2}\n')
            staging.replace(folder / f"new-{number:05d}.json")
            wait_for_batch(query, number + 1)
        progress = [p for p in query.recentProgress if p["numInputRows"] and p["batchId"] > 0]
    finally:
        query.stop()
    listing = statistics.median(p["durationMs"]["latestOffset"] for p in progress)
    batch = statistics.median(p["durationMs"]["triggerExecution"] for p in progress)
    return listing, batch


def wait_for_batch(query, batch_id: int, timeout: float = 300.0) -> None:  # type: ignore[no-untyped-def]
    """Wait until the query has run batch ``batch_id`` with input."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = [p for p in query.recentProgress if p["batchId"] == batch_id and p["numInputRows"]]
        if done:
            return
        time.sleep(0.02)
    raise SystemExit(f"batch {batch_id} did not run within {timeout:.0f} s")


if __name__ == "__main__":
    main()
