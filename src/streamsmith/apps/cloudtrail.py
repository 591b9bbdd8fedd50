"""CloudTrail ETL: AWS audit log files -> the ``cloudtrail_events`` Parquet table by date.

The e-book's first continuous application. AWS delivers gzipped JSON documents to a
bucket; the pipeline explodes their ``Records``, parses ``eventTime``, flattens the
identity and keeps free-form request/response objects as JSON text, so ad-hoc queries
over recent activity run on a partitioned columnar table instead of raw JSON.
The default spec reads ``<storage_root>/input/cloudtrail`` every 10 seconds, up to 20
files per batch: raise or drop ``max_files_per_trigger`` and set ``latest_first`` for
the seed's backlog-plus-live recipe.
"""

from __future__ import annotations

from streamsmith.api import Pipeline
from streamsmith.transforms.cloudtrail import cloudtrail_events

pipeline = Pipeline(
    "cloudtrail",
    description="CloudTrail log files to a date-partitioned Parquet table",
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
