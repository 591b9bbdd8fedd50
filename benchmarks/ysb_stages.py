"""Where the YSB app's time goes: its queries switched on one at a time, and the parse.

On one generated data set (``--events`` ad events as JSON-lines files), prints the warm
median of ``available-now`` runs of the ``campaign_windows`` flow with only its table
query (which still counts every record it reads, so Spark cannot push its filter into
the JSON reader), with table and quarantine, and with all three (table, quarantine,
late events), beside bare Spark's ``readStream.json`` with the same query (files only); then,
as batch jobs into Spark's ``noop`` sink, the bare JSON reader against the app's source
and parse (accepted views, quarantined rows, every row checked) and against Arrow's
JSON reader in a Python data source (``_arrow_lines.py``) under the same parse: the
file path keeps the faster reader. With ``--kafka``, the same events
are produced to a 3-partition topic of an embedded broker and the flow reads them from
there (JSON decoded at the source); the batch jobs are then the source alone (raw
values), the source decoding JSON, and the app's parse on top of it.

    .venv/bin/python benchmarks/ysb_stages.py --events 1000000 [--kafka]
"""

from __future__ import annotations

import shutil
import statistics
from collections.abc import Callable
from pathlib import Path

from _arrow_lines import read_arrow_lines
from _common import bare_query, timed_rounds, ysb_arguments, ysb_bench, ysb_catch_up
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamsmith.config import SourceSpec
from streamsmith.io.files import read_files
from streamsmith.io.lake import read_table, table_path
from streamsmith.io.sources.kafka import read_kafka
from streamsmith.runtime.runner import full_refresh, run_pipeline
from streamsmith.schemas.ysb import AD_EVENT_SCHEMA
from streamsmith.transforms.quarantine import REJECT_REASON
from streamsmith.transforms.ysb import ad_events


def main() -> None:
    args = ysb_arguments(__doc__, 4, "per stage; the first is discarded")
    with ysb_bench("stages", args.events, kafka=args.kafka) as (root, spark, spec):
        folder = root / "input" / "ysb"
        print(f"{'stage (warm median, rounds interleaved)':<52}{'seconds':>8}")
        streams = {}
        for label, changes in (
            (ALONE, {"record_late": False, "quarantine": False}),
            ("stream: table + quarantine", {"record_late": False}),
            ("stream: table + quarantine + late events", {}),
        ):
            plan = ysb_catch_up(spec, **changes)

            def run(plan=plan) -> None:  # type: ignore[no-untyped-def]
                full_refresh(plan)
                run_pipeline(spark, plan)

            streams[label] = run
        if not args.kafka:
            streams[BARE] = bare_run(spark, root)
        medians = {}
        for label, timings in timed_rounds(args.runs, streams).items():
            medians[label] = report(label, timings)
        if BARE in medians:
            ratio = medians[BARE] / medians[ALONE]
            print(f"{'  table query only / bare Spark, in events/s':<52}{ratio:>8.2f}")

        source = ysb_catch_up(spec).flows[0].source
        for label, timings in timed_rounds(
            args.runs, batch_stages(spark, source, str(folder))
        ).items():
            report(label, timings)


VIEWS = "view"  # the event type the query keeps
ALONE = "stream: table query only"
BARE = "stream: bare Spark readStream.json, same query"


def bare_run(spark: SparkSession, root: Path) -> Callable[[], None]:
    """The query as a user writes it in plain Spark, over the same files."""
    campaigns = read_table(spark, table_path(root, "ysb_campaigns")).cache()
    folder = str(root / "input" / "ysb")

    def run() -> None:
        out = root / "bare"
        shutil.rmtree(out, ignore_errors=True)
        events = spark.readStream.schema(AD_EVENT_SCHEMA).json(folder)
        bare_query(events, campaigns, out).awaitTermination()

    return run


def batch_stages(
    spark: SparkSession, source: SourceSpec, folder: str
) -> dict[str, Callable[[], None]]:
    """The read and parse of the flow's input as batch jobs into ``noop``, each beside the
    plain reader it builds on."""
    if source.format != "kafka":
        parsed = ad_events(read_files(spark, source, folder, AD_EVENT_SCHEMA, streaming=False))
        bare = spark.read.schema(AD_EVENT_SCHEMA).json(folder).where(F.col("event_type") == VIEWS)
        arrow = ad_events(read_arrow_lines(spark, folder, AD_EVENT_SCHEMA))
        return {
            "batch: bare JSON reader, views": noop(bare.select("ad_id", "event_time")),
            **parse_stages(parsed),
            "batch: app source + parse, every row checked": noop(checked(parsed)),
            "batch: Arrow JSON data source + parse, every row": noop(checked(arrow)),
        }
    once = {k: v for k, v in source.options.items() if not k.startswith("rangeCache")}
    raw = source.model_copy(update={"options": {**once, "valueFormat": "raw"}})
    decoded = source.model_copy(update={"options": once})
    parsed = ad_events(read_kafka(spark, decoded, streaming=False, schema=AD_EVENT_SCHEMA))
    return {
        "batch: source, raw values": noop(read_kafka(spark, raw, streaming=False)),
        "batch: source, JSON decoded": noop(
            read_kafka(spark, decoded, streaming=False, schema=AD_EVENT_SCHEMA)
        ),
        **parse_stages(parsed),
    }


def parse_stages(parsed: DataFrame) -> dict[str, Callable[[], None]]:
    return {
        "batch: app source + parse, accepted views": noop(parsed
            .where(F.col(REJECT_REASON).isNull() & (F.col("event_type") == VIEWS))
            .select("ad_id", "event_time")),
        "batch: app source + parse, quarantined rows": noop(
            parsed.where(F.col(REJECT_REASON).isNotNull())),
    }  # fmt: skip


def checked(parsed: DataFrame) -> DataFrame:
    """What the flow's report needs of every row: its reject reason and event time."""
    return parsed.select(REJECT_REASON, "event_time")


def noop(frame: DataFrame):  # type: ignore[no-untyped-def]
    return lambda: frame.write.format("noop").mode("overwrite").save()


def report(label: str, timings: list[float]) -> float:
    median = statistics.median(timings[1:] or timings)
    print(f"{label:<52}{median:>8.2f}", flush=True)
    return median


if __name__ == "__main__":
    main()
