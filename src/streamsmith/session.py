"""The one place a SparkSession is built.

Defaults are tuned for a small machine running the embedded ``local[*]`` master: shuffle
partitions sized to the cores (Spark's 200 makes small stateful batches slow), the
RocksDB state store, UTC as session time zone (dates derived from event times must not
depend on the host), loopback-only networking, the current Python for workers, and
quiet logs. Everything can be overridden from the spec's ``spark.conf``.

PySpark's ``transformWithStateInPandas`` driver worker prints its UDF, return type and
state-server port on every query start, unconditionally; the JVM copies that onto its
stderr. A JVM started here gets a stderr that drops those lines and passes everything
else on unchanged.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources

from pyspark import SparkContext
from pyspark.sql import SparkSession

from streamsmith.config import SparkSpec

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
WORKER_CHATTER = b"TransformWithStateInPandas Python worker"


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
    if SparkContext._active_spark_context is None:  # a JVM is about to start
        with _jvm_stderr_filtered():
            session = builder.getOrCreate()
    else:
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel(spec.log_level)
    return session


@contextmanager
def _jvm_stderr_filtered() -> Iterator[None]:
    """Point fd 2 at a filtering pipe while the JVM starts (it inherits that fd), then
    give this process its own stderr back."""
    read_fd, write_fd = os.pipe()
    forward = os.dup(2)
    threading.Thread(
        target=_pass_on, args=(read_fd, forward), name="jvm-stderr", daemon=True
    ).start()
    saved = os.dup(2)
    sys.stderr.flush()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _pass_on(read_fd: int, out_fd: int) -> None:
    """Copy lines from ``read_fd`` to ``out_fd`` without the worker's chatter (each
    message is followed by an empty line, dropped with it)."""
    after_chatter = False
    with os.fdopen(read_fd, "rb") as pipe, os.fdopen(out_fd, "wb", buffering=0) as out:
        for line in pipe:
            chatter = WORKER_CHATTER in line
            if not chatter and not (after_chatter and not line.strip()):
                out.write(line)
            after_chatter = chatter


def _conf_str(value: str | int | float | bool) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
