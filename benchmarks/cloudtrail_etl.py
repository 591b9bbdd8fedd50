"""CloudTrail ETL throughput: gzipped CloudTrail files -> partitioned Parquet + quarantine.

Prints, for one generated data set: the session start, the first (cold) ``available-now``
run, the median of the warm runs (same JVM, checkpoints and tables cleared in between),
and a batch backfill of the same input. Both streaming queries of the flow (table and
quarantine) run in each pass, as they do in production.

    .venv/bin/python benchmarks/cloudtrail_etl.py --files 200 --records-per-file 500
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from streamsmith.apps import get_app
from streamsmith.config import Trigger, load_spec
from streamsmith.generate.cloudtrail import generate_cloudtrail
from streamsmith.io.lake import read_table
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import backfill, full_refresh, run_pipeline
from streamsmith.spark.session import build_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--records-per-file", type=int, default=500)
    parser.add_argument("--runs", type=int, default=4, help="streaming passes; first is cold")
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="streamsmith-bench-") as tmp:
        root = Path(tmp)
        app = get_app("cloudtrail")
        spec = load_spec(
            app.default_spec,
            sets=[
                f"spark.master={args.master}",
                "sources.cloudtrail_logs.max_files_per_trigger=100",
            ],
            storage_root=str(root),
        )
        plan = build_plan(app, spec, Trigger("available-now"))
        generated = generate_cloudtrail(
            spec.source_path("cloudtrail_logs"),
            files=args.files,
            records_per_file=args.records_per_file,
            seed=1,
            corrupt_fraction=0.01,
            collect_ids=False,
        )
        records = generated.valid_records + generated.quarantine_rows
        size = sum(Path(p).stat().st_size for p in generated.paths)

        started = time.perf_counter()
        spark = build_session(spec.spark, "streamsmith-bench")
        session_seconds = time.perf_counter() - started

        durations = []
        for _ in range(args.runs):
            full_refresh(plan)
            started = time.perf_counter()
            run_pipeline(spark, plan)
            durations.append(time.perf_counter() - started)
        landed = read_table(spark, plan.outputs[0].path).count()
        assert landed == generated.valid_records, (landed, generated.valid_records)

        started = time.perf_counter()
        backfill(spark, plan)
        backfill_seconds = time.perf_counter() - started
        spark.stop()

    warm = statistics.median(durations[1:]) if len(durations) > 1 else float("nan")
    print(f"input: {args.files} gzipped files, {records} records, {size / 1e6:.1f} MB compressed")
    print(f"master: {args.master}; table rows: {landed}; quarantined: {generated.quarantine_rows}")
    print(f"{'measure':<34}{'seconds':>10}{'records/s':>14}")
    print(f"{'session start':<34}{session_seconds:>10.1f}")
    for label, seconds in (
        ("stream, cold (first run)", durations[0]),
        ("stream, warm (median of rest)", warm),
        ("backfill (batch, warm)", backfill_seconds),
    ):
        print(f"{label:<34}{seconds:>10.1f}{records / seconds:>14,.0f}")


if __name__ == "__main__":
    main()
