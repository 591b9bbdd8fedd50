"""YSB in PyFlink's Table API / SQL: JSON-lines files, streaming mode, TUMBLE per campaign.

Takes ``FILES_DIR CAMPAIGNS_JSON EVENTS`` (not a broker and topic as the other peers:
Flink's Kafka connector is a separate jar, not in the ``apache-flink`` wheel). Every
``*.json`` file of ``FILES_DIR`` is read once (a bounded read) in streaming mode, as a
source table of its own with a watermark 10 s behind its newest ``event_time``; lines
that are not JSON are skipped (``json.ignore-parse-errors``). A finished source moves its
watermark to the end of time, so every window is emitted once, the last ones as the
input runs out.

A regular join drops the rows' time attribute (a window cannot follow it), so the ad ->
campaign table is a versioned table (primary key ``ad_id``, every version valid from the
epoch) joined ``FOR SYSTEM_TIME AS OF`` the event's time: an event-time temporal join,
which keeps it. In the same job, a 10-second TUMBLE count of all parsed events counts
what was read (an event dropped as late would be missing from it as from the windows).

Prints one JSON line: ``events``, ``seconds`` (wall time from ``execute``, which plans
the job, starts Flink's local cluster and submits it, to the job's end), ``windows``
(campaign x window rows), ``views`` (their sum), ``start_seconds`` (PyFlink's import and
the gateway JVM's start, before that; not in ``seconds``) and ``job_seconds`` (Flink's
own figure for the job: from its cluster receiving it to its end).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

began = time.perf_counter()
# No Python UDFs here, so no Python worker: without this, the job would start PyFlink's
# loopback worker pool, a gRPC server on every interface ("process" is PyFlink's other
# mode, which starts workers only for UDFs).
os.environ["_python_worker_execution_mode"] = "process"  # noqa: SIM112 (PyFlink's spelling)

from pyflink.common import RowKind  # noqa: E402
from pyflink.table import EnvironmentSettings, TableEnvironment  # noqa: E402

files_dir, campaigns_json, _expected = sys.argv[1:4]
env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
config = env.get_config()
config.set("parallelism.default", "2")
config.set("table.local-time-zone", "UTC")  # TIMESTAMP_LTZ windows aligned to UTC
# The local cluster's servers (REST, blob server, result collection) would bind every
# interface: loopback only.
for option in ("rest.bind-address", "jobmanager.bind-host", "taskmanager.bind-host"):
    config.set(option, "127.0.0.1")
started = time.perf_counter() - began

JSON_TIMES = "'format' = 'json', 'json.timestamp-format.standard' = 'ISO-8601'"


def sql_path(path: Path) -> str:
    return path.resolve().as_uri().replace("'", "''")


# One source table per file, each with its own watermark (the union's is the least of
# them): each file is in event-time order, but one table over the folder reads the files
# in no such order (listing order, handed out last first), and a reader that moves on to
# an earlier file finds its watermark past that file's windows, which drops them as late.
files = sorted(Path(files_dir).glob("*.json"))
if not files:
    raise SystemExit(f"no *.json files in {files_dir}")
for number, path in enumerate(files):
    env.execute_sql(f"""
        CREATE TEMPORARY TABLE events_{number} (
            user_id STRING, page_id STRING, ad_id STRING, ad_type STRING, event_type STRING,
            event_time TIMESTAMP_LTZ(3), ip_address STRING,
            WATERMARK FOR event_time AS event_time - INTERVAL '10' SECOND
        ) WITH ('connector' = 'filesystem', 'path' = '{sql_path(path)}',
                {JSON_TIMES}, 'json.ignore-parse-errors' = 'true')
    """)  # fmt: skip
everything = " UNION ALL ".join(f"SELECT * FROM events_{n}" for n in range(len(files)))
env.create_temporary_view("events", env.sql_query(everything))

with tempfile.TemporaryDirectory(prefix="ysb-flink-") as scratch:
    # The campaign table as JSON lines, each row a version valid from the epoch on.
    with open(campaigns_json, encoding="utf-8") as file:
        rows = json.load(file)
    lines = (
        json.dumps({"ad_id": ad, "campaign_id": campaign, "since": "1970-01-01T00:00:00.000Z"})
        for ad, campaign in rows
    )
    (Path(scratch) / "campaigns.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
    env.execute_sql(f"""
        CREATE TABLE campaigns (
            ad_id STRING, campaign_id STRING, since TIMESTAMP_LTZ(3),
            PRIMARY KEY (ad_id) NOT ENFORCED,
            WATERMARK FOR since AS since
        ) WITH ('connector' = 'filesystem', 'path' = '{sql_path(Path(scratch))}', {JSON_TIMES})
    """)  # fmt: skip
    env.create_temporary_view(
        "seen",
        env.sql_query("""
            SELECT v.event_time, c.campaign_id
            FROM (SELECT ad_id, event_time FROM events WHERE event_type = 'view') AS v
            JOIN campaigns FOR SYSTEM_TIME AS OF v.event_time AS c ON v.ad_id = c.ad_id
        """),
    )  # fmt: skip
    # Campaign windows, and (campaign NULL) every parsed event counted per window too.
    query = env.sql_query("""
        SELECT campaign_id, window_start, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE seen, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
        GROUP BY campaign_id, window_start, window_end
        UNION ALL
        SELECT CAST(NULL AS STRING), window_start, COUNT(*)
        FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
        GROUP BY window_start, window_end
    """)  # fmt: skip

    events = views = windows = 0
    keys: set[tuple[str, object]] = set()
    submitted = time.perf_counter()
    result = query.execute()
    with result.collect() as results:
        for row in results:
            if row.get_row_kind() != RowKind.INSERT:
                raise SystemExit(f"a window was emitted twice or retracted: {row}")
            campaign, start, count = row
            if campaign is None:
                events += count
            elif (campaign, start) in keys:
                raise SystemExit(f"a window was emitted twice: {row}")
            else:
                keys.add((campaign, start))
                windows += 1
                views += count
    finished = result.get_job_client().get_job_execution_result().result()
    seconds = time.perf_counter() - submitted

print(json.dumps({"peer": "PyFlink", "events": events, "seconds": seconds,
                  "windows": windows, "views": views, "start_seconds": started,
                  "job_seconds": finished.get_net_runtime() / 1000}))  # fmt: skip
