"""Where the YSB app's time goes: its queries switched on one at a time, and the parse.

On one generated data set (``--events`` ad events as JSON-lines files), prints the warm
median of ``available-now`` runs of the ``campaign_windows`` flow with only its table
query, with table and quarantine, and with all three (table, quarantine, late events);
then, as batch jobs into Spark's ``noop`` sink, the bare JSON reader against the app's
source and parse (accepted views, quarantined rows).

    .venv/bin/python benchmarks/ysb_stages.py --events 1000000
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
from pathlib import Path

from _common import timed
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamsmith.apps import get_app
from streamsmith.config import SourceSpec, SparkSpec, Trigger, load_spec
from streamsmith.generate.ysb import write_ysb, ysb_data
from streamsmith.io.files import read_files
from streamsmith.io.lake import replace_static_table, table_path
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import full_refresh, run_pipeline
from streamsmith.schemas.ysb import AD_EVENT_SCHEMA, CAMPAIGNS_SCHEMA
from streamsmith.session import build_session
from streamsmith.transforms.quarantine import REJECT_REASON
from streamsmith.transforms.ysb import ad_events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=4, help="per stage; the first is discarded")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="streamsmith-bench-stages-") as tmp:
        root = Path(tmp)
        data = ysb_data(args.events, rate=10_000, chunks=8, seed=1)
        write_ysb(data, root / "input" / "ysb")
        replace_static_table(table_path(root, "ysb_campaigns"), data.campaigns, CAMPAIGNS_SCHEMA)
        spark = build_session(SparkSpec(master="local[*]"), "bench-ysb-stages")
        base = get_app("ysb")
        spec = load_spec(base.default_spec, storage_root=str(root))
        print(f"{'stage (warm median)':<52}{'seconds':>8}")
        for label, changes in (
            ("stream: table query only", {"record_late": False, "quarantine": False}),
            ("stream: table + quarantine", {"record_late": False}),
            ("stream: table + quarantine + late events", {}),
        ):
            flow = dataclasses.replace(base.flows[0], **changes)
            app = dataclasses.replace(base, flows=(flow, base.flows[1]))
            plan = build_plan(app, spec, Trigger("available-now"))

            def run(plan=plan) -> None:  # type: ignore[no-untyped-def]
                full_refresh(plan)
                run_pipeline(spark, plan)

            report(label, timed(args.runs, run))

        folder = str(root / "input" / "ysb")
        views = F.col("event_type") == "view"
        source = read_files(spark, SourceSpec(format="jsonl", path=folder), folder, AD_EVENT_SCHEMA,
                            streaming=False)  # fmt: skip
        parsed = ad_events(source)
        for label, frame in (
            ("batch: bare JSON reader, views", spark.read.schema(AD_EVENT_SCHEMA).json(folder)
             .where(views).select("ad_id", "event_time")),
            ("batch: app source + parse, accepted views", parsed
             .where(F.col(REJECT_REASON).isNull() & views).select("ad_id", "event_time")),
            ("batch: app source + parse, quarantined rows",
             parsed.where(F.col(REJECT_REASON).isNotNull())),
        ):  # fmt: skip
            report(label, timed(args.runs, noop(frame)))
        spark.stop()


def noop(frame: DataFrame):  # type: ignore[no-untyped-def]
    return lambda: frame.write.format("noop").mode("overwrite").save()


def report(label: str, timings: list[float]) -> None:
    print(f"{label:<52}{statistics.median(timings[1:] or timings):>8.2f}", flush=True)


if __name__ == "__main__":
    main()
