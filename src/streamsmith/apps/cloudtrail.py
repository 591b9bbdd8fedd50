"""CloudTrail ETL: AWS audit log files -> the ``cloudtrail_events`` Delta table by date.

The e-book's first continuous application. AWS delivers gzipped JSON documents to a
bucket; the pipeline explodes their ``Records``, parses ``eventTime``, flattens the
identity and keeps free-form request/response objects as JSON text, so ad-hoc queries
over recent activity run on a partitioned columnar table instead of raw JSON.
The default spec reads ``<storage_root>/input/cloudtrail`` every 10 seconds, up to 20
files per batch: raise or drop ``max_files_per_trigger`` and set ``latest_first`` for
the seed's backlog-plus-live recipe.

The lake is kept as a continuous application needs it: the table's small files are
compacted after each catch-up run and hourly when always on, files no version of the
last 7 days needs are vacuumed nightly, and ``cloudtrail_daily_activity`` (calls and
failures per day and API) is a materialized view refreshed after each catch-up run and
every 15 minutes.
"""

from __future__ import annotations

from streamsmith.api import Pipeline
from streamsmith.transforms.cloudtrail import cloudtrail_events

DAILY_ACTIVITY = (
    "SELECT date, eventSource, eventName, count(*) AS calls, count(errorCode) AS failed_calls, "
    "count(DISTINCT sourceIPAddress) AS source_ips FROM cloudtrail_events "
    "GROUP BY date, eventSource, eventName"
)

pipeline = Pipeline(
    "cloudtrail",
    description="CloudTrail log files to a date-partitioned Delta table",
    sources={
        "cloudtrail_logs": {
            "format": "json",
            "path": "input/cloudtrail",
            "glob": "*.json*",
            "max_files_per_trigger": 20,
            "latest_first": False,
        }
    },
    trigger="interval=10s",
    input_hint="e.g. `streamsmith generate cloudtrail --out {path}`",
    spec={
        "maintenance": {"optimize": "0 * * * *", "vacuum": "30 3 * * *", "retain": "7 days"},
        "materialized_views": {
            "cloudtrail_daily_activity": {
                "sql": DAILY_ACTIVITY,
                "schedule": "*/15 * * * *",
                "description": "calls, failed calls and caller IPs per day and API",
            }
        },
    },
)

# The transform parses and tags each record itself (bad input to quarantine).
pipeline.flow(
    cloudtrail_events,
    source="cloudtrail_logs",
    sink={"table": "cloudtrail_events", "partition_by": ["date"]},
    description="explode Records, parse eventTime, flatten identity; bad input to quarantine",
)

APP = pipeline.app
DEFAULT_SPEC = APP.default_spec
