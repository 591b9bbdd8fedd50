"""The one place a SparkSession is built.

Defaults are tuned for a small machine running the embedded ``local[*]`` master: shuffle
partitions sized to the cores (Spark's 200 makes small stateful batches slow), the
RocksDB state store, UTC as session time zone (dates derived from event times must not
depend on the host), loopback-only networking, the current Python for workers, and
quiet logs. Everything can be overridden from the spec's ``spark.conf``.

With a cluster master (``spark://...``, ``k8s://...``, ``yarn``) the executors may not
have streamsmith installed, yet they unpickle its code: the Kafka source is a Python Data
Source, and UDFs and stateful processors live in the package. So the driver zips the
installed package (once per content, in a folder of streamsmith's cache only this user
can enter) and adds it with
``addPyFile`` before any query is defined; Spark serves it to every executor and puts it
first on their Python path. A master on loopback (``streamsmith cluster start``) also
keeps the driver on 127.0.0.1.

PySpark's ``transformWithStateInPandas`` driver worker prints its UDF, return type and
state-server port on every query start, unconditionally; the JVM copies that onto its
stderr. A JVM started here gets a stderr that drops those lines and passes everything
else on unchanged.
"""

from __future__ import annotations

import atexit
import hashlib
import io
import logging
import os
import re
import shlex
import shutil
import sys
import threading
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from pyspark import SparkConf, SparkContext, SparkFiles
from pyspark.logger import PySparkLogger
from pyspark.sql import SparkSession

from streamsmith.config import SparkSpec, is_secret_key
from streamsmith.defaults import SESSION_TIME_ZONE
from streamsmith.errors import NEW_FIELDS_MARK
from streamsmith.processes import private_dir, read_own_file, write_new_file
from streamsmith.spark import auth, cluster, jars, jvm, jvm_archive

log = logging.getLogger(__name__)

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
ROCKSDB_CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
WORKER_CHATTER = b"TransformWithStateInPandas Python worker"
# The JVM's note on the module Spark's launcher always adds: nothing a user can act on.
INCUBATOR_NOTE = b"WARNING: Using incubator modules: jdk.incubator.vector"
# An ERROR log record's first line, and the lines that continue one: an exception
# ("org.apache...Exception: ..."), its causes, stack frames and "... 12 more"; of a
# failed foreachBatch function, the Python traceback in its message and the Java error
# of a Spark call it made (py4j's ": org.apache...Exception: ...").
ERROR_RECORD = re.compile(rb"^\d\d:\d\d:\d\d ERROR ")
CONTINUED = re.compile(
    rb"^(\s|Caused by|: |Traceback \(most recent call last\):|[a-z][\w$]*(\.[\w$]+)+(: |\r?$))"
)
NEW_FIELDS = NEW_FIELDS_MARK.encode()
STREAMING_JOB_ARTIFACTS = "streaming_job"
PYFILES_DIR = "pyfiles"  # under streamsmith's cache folder
_SUBMIT_ARGS = "PYSPARK_SUBMIT_ARGS"  # how PySpark passes options to spark-submit
# Conf keys that name a credential without saying "secret" or "token" (those
# config.is_secret_key knows): S3A's access.key, Azure's account.key.<account>, GCS's
# private.key, a SAS or a credentials value.
_CREDENTIAL_KEY = re.compile(
    r"(^|\.)((access|account|private)\.key|key|sas|credentials?)(\.|$)", re.IGNORECASE
)
# How much finished work the driver remembers (Spark's default: 1,000 of each).
RETAINED_HISTORY = {
    "spark.sql.ui.retainedExecutions": "100",
    "spark.ui.retainedJobs": "100",
    "spark.ui.retainedStages": "100",
}
DELTA_SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"
# Spark keeps the classes it generates for the last 100 plans and expressions (its default)
# and compiles anew what fell out. A run's queries with their Delta commits, snapshots and
# checkpoints use more: at 100 an always-on ysb run compiled 67 classes a micro-batch, at
# 1,000 four (benchmarks/README.md, `cost_over_time.py codegen`).
CODEGEN_CACHE = "spark.sql.codegen.cache.maxEntries"
CODEGEN_CACHE_ENTRIES = "1000"
# Hadoop's local file system without a child process per new file or folder (`chmod`) and
# per rename (`readlink`, before each checkpoint file and Delta commit is renamed into
# place): Spark ships without Hadoop's native library, so Hadoop forks for both, a few
# milliseconds of CPU each and dozens per micro-batch (`spark/java/LocalFileSystemInJvm`).
# Local masters only, whose executors live in the driver: on a cluster's executors, which
# get streamsmith's jar through `spark.jars`, it is untried.
LOCAL_FILES_IN_JVM = {
    "spark.hadoop.fs.file.impl": "io.streamsmith.fs.LocalFileSystemInJvm",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "io.streamsmith.fs.LocalFsInJvm",
}
# Delta Lake's SQL (MERGE, VACUUM, time travel, DESCRIBE HISTORY) and its catalog.
DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


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


_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def master_on_loopback(master: str) -> bool:
    """Whether a cluster master runs on this machine's loopback (``spark://127.0.0.1:7077``,
    ``spark://localhost:7077,127.0.0.1:7078``, ``local-cluster[...]``): its executors can
    only reach a driver that advertises 127.0.0.1."""
    if master.startswith("local-cluster["):
        return True
    match = re.fullmatch(r"spark://(.+)", master)
    if not match:
        return False
    hosts = [address.rsplit(":", 1)[0].lower() for address in match.group(1).split(",")]
    return all(host in _LOOPBACK_HOSTS or host.startswith("127.") for host in hosts)


# The driver JVM compiles with the client compiler only (``runtime.catchup.small_backlog``).
CLIENT_COMPILER = "-XX:TieredStopAtLevel=1"


def default_conf(spec: SparkSpec, *, client_compiler: bool = False) -> dict[str, str]:
    """The conf streamsmith sets before the spec's own ``spark.conf`` is applied; with
    ``client_compiler``, a JVM about to start compiles with the client compiler only (a
    short life, in which the server compiler's work does not pay off)."""
    cores = local_cores(spec.master)
    partitions = str(max(2, cores or 8))
    conf = {
        "spark.sql.session.timeZone": SESSION_TIME_ZONE,
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        # Each state commit writes a changelog of the batch's changes, not a snapshot of
        # the whole store (made in the background every 10 versions): a commit's cost then
        # follows the batch, not the state's size. Spark reads either kind on restart.
        ROCKSDB_CHANGELOG: "true",
        "spark.sql.shuffle.partitions": partitions,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
        "spark.driver.memory": "2g",
        # An always-on run adds a SQL execution, jobs and stages per micro-batch; Spark
        # keeps the last 1,000 of each in the driver's heap for its UI (off here), so the
        # heap would grow for a thousand batches. A tenth of that serves the listeners.
        **RETAINED_HISTORY,
        CODEGEN_CACHE: CODEGEN_CACHE_ENTRIES,
        # JDBC clients of `streamsmith sql-server` share the session that holds the lake
        # views and the memory tables, instead of each getting an empty one.
        "spark.sql.hive.thriftServer.singleSession": "true",
    }
    conf.update(jars.session_conf())  # Kafka, Avro and Delta: resolved by `make setup`
    conf.update(DELTA_CONF)
    if cores is not None:
        # Delta rebuilds a table's file list in 50 partitions by default: on a few local
        # cores that is 50 tasks for a log of a few dozen commits, at every MERGE, read
        # and checkpoint of a small table.
        conf[DELTA_SNAPSHOT_PARTITIONS] = partitions
        conf.update(LOCAL_FILES_IN_JVM)
    log4j = resources.files("streamsmith").joinpath("log4j2.properties")
    options = [f"-Dlog4j2.configurationFile=file:{log4j}", *jvm_archive.java_options(spec.conf)]
    if client_compiler:
        options.append(CLIENT_COMPILER)
    conf["spark.driver.extraJavaOptions"] = " ".join(options)
    if cores is not None or master_on_loopback(spec.master):
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.driver.host"] = "127.0.0.1"
    return conf


# Conf whose value is a list of options: the spec's adds to streamsmith's, after it (a
# JVM takes the last of two same flags), so a spec's GC flag keeps the log configuration
# and the class archive.
_APPENDED = ("spark.driver.extraJavaOptions",)


def merged_conf(
    ours: dict[str, str], spec_conf: Mapping[str, str | int | float | bool]
) -> dict[str, str]:
    """streamsmith's conf with the spec's over it (the spec's JVM options after ours)."""
    merged = dict(ours)
    for key, value in spec_conf.items():
        text = _conf_str(value)
        merged[key] = f"{ours[key]} {text}" if key in _APPENDED and key in ours else text
    return merged


def _quiet_query_context_logs() -> None:
    """PySpark logs every analysis error it raises (an unknown column or table) as a JSON
    record with the JVM's stack trace, before the error reaches its caller, and py4j
    every failure of a ``foreachBatch`` function (``_CallbackFailures``); streamsmith
    says what to fix in one line, so the records only bury it."""
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)
    callbacks = logging.getLogger("py4j.clientserver")
    if _CALLBACK_FAILURES not in callbacks.filters:
        callbacks.addFilter(_CALLBACK_FAILURES)


class _CallbackFailures(logging.Filter):
    """Drops py4j's record of an exception raised in Python code the JVM called (a
    ``foreachBatch`` function): the same exception goes back to the JVM and fails the
    query, whose error streamsmith reports in one line; the record would print its whole
    Python and Java traces before that, on every failed batch."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("There was an exception while executing")


_CALLBACK_FAILURES = _CallbackFailures()


def submitted_master() -> str | None:
    """The ``--master`` of ``spark-submit`` (or the ``pyspark`` shell) when it started this
    driver's JVM, else None; without it the spec's default ``local[*]`` would silently
    replace the cluster spark-submit was pointed at."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    SparkContext._ensure_initialized()  # connects to spark-submit's JVM
    master = SparkConf().get("spark.master", None)  # loads the JVM's spark.* properties
    return master or None


_HADOOP_PREFIX = "spark.hadoop."


def build_session(
    spec: SparkSpec, app_name: str = "streamsmith", *, client_compiler: bool = False
) -> SparkSession:
    """Build (or return the running) SparkSession for a pipeline (``client_compiler``:
    see :func:`default_conf`).

    Conf is applied when the JVM starts; in a process that already has a session (a test
    run, a notebook) Spark reuses it and only runtime-settable options take effect.
    Under ``spark-submit`` a spec that does not name a master runs on spark-submit's.
    """
    if "master" not in spec.model_fields_set:
        spec = spec.model_copy(update={"master": submitted_master() or spec.master})
    local = local_cores(spec.master) is not None
    if local or master_on_loopback(spec.master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(spec.master).appName(app_name)
    conf = merged_conf(default_conf(spec, client_compiler=client_compiler), spec.conf)
    starting = SparkContext._active_spark_context is None  # a JVM is about to start
    hidden = {key: value for key, value in conf.items() if starting and is_credential(key)}
    for key, value in conf.items():
        if key not in hidden:  # PySpark hands the builder's conf over as --conf key=value
            builder = builder.config(key, value)
    if starting:
        with _java_stderr_filtered(), _driver_properties(spec.master, hidden):
            session = builder.getOrCreate()
        if jvm_archive.recording():  # the archive is written as the JVM exits: wait for it
            atexit.register(jvm.exit_and_wait)
    else:
        session = builder.getOrCreate()
        # Hadoop's options (an S3 root's endpoint and keys) reach a running JVM only as
        # the session's own: each read and write copies them into its Hadoop conf.
        for key, value in conf.items():
            if key.startswith(_HADOOP_PREFIX):
                session.conf.set(key[len(_HADOOP_PREFIX) :], value)
    session.sparkContext.setLogLevel(spec.log_level)
    _quiet_query_context_logs()
    if not local:
        ship_package(session)
    return session


def ship_package(session: SparkSession) -> Path:
    """Make the installed streamsmith importable on the executors: add its zip with
    ``addPyFile`` (once per session). Returns the zip.

    Must run before any UDF or data source is defined: PySpark captures the list of
    Python includes when it wraps a function.
    """
    archive = package_zip()
    context = session.sparkContext
    if archive.name not in (getattr(context, "_python_includes", None) or []):
        context.addPyFile(str(archive))
    # The driver-side runner of Python streaming sources (which unpickles streamsmith's
    # Kafka source to plan each batch) looks for the includes in the fixed "job artifact"
    # folder <SparkFiles root>/streaming_job rather than in the root (Spark 4.x); without
    # a copy there it can only import streamsmith if PYSPARK_PYTHON has it installed.
    artifacts = Path(SparkFiles.getRootDirectory()) / STREAMING_JOB_ARTIFACTS
    artifacts.mkdir(exist_ok=True)
    if not (artifacts / archive.name).is_file():
        shutil.copyfile(archive, artifacts / archive.name)
    return archive


def package_zip(cache_dir: Path | None = None) -> Path:
    """A zip of the installed ``streamsmith`` package (sources and package data, no
    bytecode), for ``--py-files``/``addPyFile``.

    The name carries a digest of the content: an unchanged package reuses the cached zip,
    and a changed one never collides with an older zip Spark already serves under the
    same name. The zip is imported first on every executor, so it is kept in a folder only
    this user can enter (``<cache>/pyfiles``, see :func:`streamsmith.processes.private_dir`),
    created exclusively, and compared byte for byte with the zip the package makes before
    each use: a zip planted or altered under the expected name is replaced, never shipped.
    """
    package = Path(str(resources.files("streamsmith")))
    files = sorted(
        path
        for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    )
    contents = [(path.relative_to(package.parent).as_posix(), path.read_bytes()) for path in files]
    digest = hashlib.sha256()
    for name, data in contents:
        digest.update(name.encode() + b"\0" + data + b"\0")
    cache = private_dir(cache_dir or jars.cache_dir() / PYFILES_DIR)
    archive = cache / f"streamsmith-{digest.hexdigest()[:16]}.zip"
    expected = _zipped(contents)
    try:
        if read_own_file(archive) == expected:
            return archive
        log.warning("replacing %s: it is not the zip of the installed package", archive)
    except FileNotFoundError:
        pass
    except OSError as exc:  # a symlink under the zip's name (ELOOP)
        log.warning("replacing %s: %s", archive, exc.strerror)
    staging = cache / f".{archive.name}.{os.getpid()}.tmp"
    staging.unlink(missing_ok=True)
    write_new_file(staging, expected)
    staging.replace(archive)  # replaces a symlink itself, never its target
    return archive


def _zipped(contents: list[tuple[str, bytes]]) -> bytes:
    """The same bytes for the same files: fixed times and modes, so a cached zip can be
    checked by comparison."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zipped:
        for name, data in contents:
            entry = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            zipped.writestr(entry, data)
    return buffer.getvalue()


@contextmanager
def _java_stderr_filtered() -> Iterator[None]:
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
    message is followed by an empty line, dropped with it), the JVM's incubator note, and
    the log of a query stopped on purpose to add a new field (:func:`_stopped_on_purpose`)."""
    after_chatter = False
    with os.fdopen(read_fd, "rb") as pipe, os.fdopen(out_fd, "wb", buffering=0) as out:
        for line in _stopped_on_purpose(pipe):
            chatter = WORKER_CHATTER in line
            if line.rstrip() == INCUBATOR_NOTE:
                continue
            if not chatter and not (after_chatter and not line.strip()):
                out.write(line)
            after_chatter = chatter


def is_credential(key: str) -> bool:
    """Whether the conf ``key`` holds a credential, which the driver JVM must get from a
    file rather than from its command line (``/proc/<pid>/cmdline`` is readable by every
    local user)."""
    return is_secret_key(key) or bool(_CREDENTIAL_KEY.search(key))


@contextmanager
def _driver_properties(master: str, hidden: dict[str, str]) -> Iterator[None]:
    """Hand the driver JVM about to start its secrets through files only this user can
    read, never as ``--conf`` on its command line: the secret of a cluster
    ``streamsmith cluster start`` secured (its ``--properties-file``), and the conf
    ``hidden`` (an ``--extra-properties-file`` written for this start and removed once the
    JVM has read it)."""
    properties = cluster.auth_properties(master)
    args = [] if properties is None else ["--properties-file", str(properties)]
    extra = auth.driver_properties(hidden) if hidden else None
    if extra is not None:
        args += ["--extra-properties-file", str(extra)]
    before = os.environ.get(_SUBMIT_ARGS)
    if args:
        quoted = " ".join(shlex.quote(arg) for arg in args)
        os.environ[_SUBMIT_ARGS] = f"{quoted} {before or 'pyspark-shell'}"
    try:
        yield
    finally:
        if extra is not None:
            extra.unlink(missing_ok=True)
        if before is None:
            os.environ.pop(_SUBMIT_ARGS, None)
        else:
            os.environ[_SUBMIT_ARGS] = before


def _stopped_on_purpose(lines: Iterable[bytes]) -> Iterator[bytes]:
    """``lines`` without the error records, stack traces and all, of a query that
    stopped at a field its schema lacks: with ``add_new_columns`` the runtime stores the
    field and runs the batch again, which is the design working; with
    ``fail_on_new_columns`` the run fails with streamsmith's own message naming the field.

    ERROR records in a row (a Delta write logs its aborted job, then the query its
    failure) and the lines that continue them (exceptions, causes, stack frames) are held
    as one group, dropped whole when one of its lines carries the new-field mark."""
    group: list[bytes] = []
    for line in lines:
        if group and (ERROR_RECORD.match(line) or CONTINUED.match(line)):
            group.append(line)
            continue
        if group:
            if not any(NEW_FIELDS in held for held in group):
                yield from group
            group = []
        if ERROR_RECORD.match(line):
            group = [line]
        else:
            yield line
    if group and not any(NEW_FIELDS in held for held in group):
        yield from group


def _conf_str(value: str | int | float | bool) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
