"""The one place a SparkSession is built.

Defaults are tuned for a small machine running the embedded ``local[*]`` master: shuffle
partitions sized to the cores (Spark's 200 makes small stateful batches slow), the
RocksDB state store, UTC as session time zone (dates derived from event times must not
depend on the host), loopback-only networking, the current Python for workers, and
quiet logs. Everything can be overridden from the spec's ``spark.conf``.
"""

from __future__ import annotations

import os
import re
import sys
from importlib import resources

from pyspark.sql import SparkSession

from streamsmith.config import SparkSpec

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def local_cores(master: str) -> int | None:
    """Number of cores a ``local[...]`` master uses, or None for a cluster master."""
    if master == "local":
        return 1
    match = re.fullmatch(r"local\[(\*|\d+)(?:,\s*\d+)?\]", master)
    if not match:
        return None
    if match.group(1) == "*":
        return os.cpu_count() or 1
    return int(match.group(1))


def default_conf(spec: SparkSpec) -> dict[str, str]:
    """The conf streamsmith sets before the spec's own ``spark.conf`` is applied."""
    cores = local_cores(spec.master)
    conf = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.shuffle.partitions": str(max(2, cores or 8)),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
        "spark.driver.memory": "2g",
        # JDBC clients of `streamsmith sql-server` share the session that holds the lake
        # views and the memory tables, instead of each getting an empty one.
        "spark.sql.hive.thriftServer.singleSession": "true",
    }
    log4j = resources.files("streamsmith").joinpath("log4j2.properties")
    conf["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{log4j}"
    if cores is not None:
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.driver.host"] = "127.0.0.1"
    return conf


def build_session(spec: SparkSpec, app_name: str = "streamsmith") -> SparkSession:
    """Build (or return the running) SparkSession for a pipeline.

    Conf is applied when the JVM starts; in a process that already has a session (a test
    run, a notebook) Spark reuses it and only runtime-settable options take effect.
    """
    if local_cores(spec.master) is not None:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(spec.master).appName(app_name)
    conf = default_conf(spec)
    conf.update({key: _conf_str(value) for key, value in spec.conf.items()})
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(spec.log_level)
    return session


def _conf_str(value: str | int | float | bool) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
