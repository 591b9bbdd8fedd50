"""The stateless Kafka -> Kafka flow of ``ysb_latency.py --stateless`` in PyFlink SQL.

Takes ``BOOTSTRAP SOURCE_TOPIC OUTPUT_TOPIC`` and, on stdin, a JSON object of Kafka client
settings for both tables (the login to streamsmith's broker, which takes SASL/PLAIN only:
security.protocol, sasl.mechanism, sasl.jaas.config), and runs until killed (SIGTERM). Reads the
ad events (JSON: ad_id, user_id, event_type, sent, seq) from the source topic's earliest
offset, keeps the views, gives each a tier, and writes them to the output topic with
the send time and sequence number as a raw string key (``sent:seq``) and the same JSON
value as streamsmith's flow (``FLOW_SQL`` of ``_stateless_latency.py``). Flink's SQL
Kafka connector is the jar ``make peers-flink`` resolved into this virtualenv's
``jars/`` folder; nothing is downloaded here.

Set for latency, as Flink's documentation advises, and why:

- ``parallelism.default = 1``: the source topic has one partition, so one source
  subtask; with every operator at parallelism 1, source -> filter -> sink are chained
  into one task and a record crosses no network buffer between them.
- ``execution.buffer-timeout.interval = 0 ms``: flush network buffers after every
  record (Flink's default waits up to 100 ms to fill them). Chained as above there is
  no buffer to flush; it is set so that a plan that does get an exchange does not add
  up to 100 ms.
- ``execution.checkpointing.interval = 5 s``, ``execution.checkpointing.mode =
  AT_LEAST_ONCE``: at-least-once delivery (the sink flushes its producer and the source
  commits its offsets at each checkpoint; no barrier alignment), every 5 s like the
  benchmark's ``real-time=5s`` row. Exactly-once would hold the output back in Kafka
  transactions until each checkpoint completes, which is the latency this row measures.
- Sink producer ``linger.ms = 0``: send each record at once (Kafka's clients 4.x wait
  5 ms by default to fill a batch). Source consumer left at Kafka's defaults
  (``fetch.min.bytes = 1``: a fetch returns as soon as a record is there).
- Mini-batching of the SQL planner stays off (its default), and no Python UDF runs,
  so no Python worker is in the path.

Loopback only: Flink's local cluster servers bind 127.0.0.1, and
``_python_worker_execution_mode=process`` keeps PyFlink from starting its loopback
worker pool (a gRPC server on every interface).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

# No Python UDFs, so no Python worker: without this, PyFlink starts its loopback worker
# pool, a gRPC server on every interface ("process" starts workers only for UDFs).
os.environ["_python_worker_execution_mode"] = "process"  # noqa: SIM112 (PyFlink's spelling)

from pyflink.table import EnvironmentSettings, TableEnvironment

bootstrap, source_topic, output_topic = sys.argv[1:4]
jars = sorted((Path(sys.prefix) / "jars").glob("*.jar"))
if not jars:
    raise SystemExit(f"no Kafka connector jar in {Path(sys.prefix) / 'jars'}: make peers-flink")


def _sql(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


# The broker's login (JSON on stdin, empty for a broker without one). The SQL connector jar
# shades the Kafka client, so the JAAS line names the shaded login module.
client = json.loads(sys.stdin.read() or "{}")
if "sasl.jaas.config" in client:
    client["sasl.jaas.config"] = client["sasl.jaas.config"].replace(
        "org.apache.kafka.", "org.apache.flink.kafka.shaded.org.apache.kafka.", 1
    )
login = "".join(f", {_sql('properties.' + key)} = {_sql(value)}" for key, value in client.items())

env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
config = env.get_config()
config.set("pipeline.jars", ";".join(jar.as_uri() for jar in jars))
config.set("parallelism.default", "1")
config.set("execution.buffer-timeout.interval", "0 ms")
config.set("execution.checkpointing.interval", "5 s")
config.set("execution.checkpointing.mode", "AT_LEAST_ONCE")
for option in ("rest.bind-address", "jobmanager.bind-host", "taskmanager.bind-host"):
    config.set(option, "127.0.0.1")

env.execute_sql(f"""
    CREATE TABLE ads (ad_id STRING, user_id STRING, event_type STRING, sent BIGINT, seq BIGINT)
    WITH ('connector' = 'kafka', 'topic' = '{source_topic}',
          'properties.bootstrap.servers' = '{bootstrap}',
          'properties.group.id' = 'pyflink-stateless',
          'scan.startup.mode' = 'earliest-offset', 'format' = 'json'{login})
""")  # fmt: skip
env.execute_sql(f"""
    CREATE TABLE ad_views (k STRING, ad_id STRING, user_id STRING, sent BIGINT, tier STRING)
    WITH ('connector' = 'kafka', 'topic' = '{output_topic}',
          'properties.bootstrap.servers' = '{bootstrap}',
          'properties.linger.ms' = '0',
          'sink.delivery-guarantee' = 'at-least-once',
          'key.format' = 'raw', 'key.fields' = 'k',
          'value.format' = 'json', 'value.fields-include' = 'EXCEPT_KEY'{login})
""")  # fmt: skip
job = env.execute_sql("""
    INSERT INTO ad_views
    SELECT CAST(sent AS STRING) || ':' || CAST(seq AS STRING), ad_id, user_id, sent,
           CASE WHEN user_id < 'u5' THEN 'gold' ELSE 'basic' END
    FROM ads
    WHERE event_type = 'view'
""")  # fmt: skip


def stop(_signal: int, _frame: object) -> None:
    """SIGTERM: cancel the job so the local cluster shuts down, then exit."""
    client = job.get_job_client()
    if client is not None:
        client.cancel().result()
    raise SystemExit(0)


signal.signal(signal.SIGTERM, stop)
print("job submitted", flush=True)
job.wait()
