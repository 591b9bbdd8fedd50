"""Log curation, the seeds' log pipeline (e-book Part 3).

A log collector delivers each entry of every service in a JSON envelope (source, host,
service, collection time, collector metadata) and re-sends it when a delivery is not
acknowledged. The flow drops those retries on the collector's ``(id, seq)`` within a
10-minute watermark, structures JSON entries with ``from_json`` and log4j lines with
``regexp_extract`` into one schema, sends what is neither to quarantine, and writes
``service_logs`` partitioned by the entry's date — so "how many ERROR messages between
10:00 and 10:30 for this service?" reads one day's files and two columns:

    streamsmith query --app logs "SELECT count(*) FROM service_logs WHERE service = 'billing'
      AND level = 'ERROR' AND log_time >= '2026-11-20 10:00' AND log_time < '2026-11-20 10:30'"

Retries older than the watermark are recorded in ``service_logs_late``, so
``input = table + quarantine + late + duplicates`` reconciles.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from streamsmith.api import EventTime, Pipeline
from streamsmith.schemas.logs import ENVELOPE_SCHEMA
from streamsmith.transforms.logs import EVENT_TIME, curated_logs, log_entries

LATENESS = "10 minutes"

pipeline = Pipeline(
    "logs",
    description="collector envelopes deduplicated and structured (JSON or log4j) by date",
    sources={"logs": {"format": "jsonl", "path": "input/logs"}},
    trigger="interval=10s",
    input_hint="e.g. `streamsmith generate logs --to {path}`",
)


@pipeline.flow(
    source="logs",
    sink={"table": "service_logs", "partition_by": ["date"]},
    parse=log_entries,
    schema=ENVELOPE_SCHEMA,
    event_time=EventTime(EVENT_TIME, LATENESS),
    description=f"dedup on collector (id, seq) with a {LATENESS} watermark; parse entries",
)
def service_logs(envelopes: DataFrame, event_time: EventTime) -> DataFrame:
    return curated_logs(envelopes, delay=event_time.lateness)


APP = pipeline.app
