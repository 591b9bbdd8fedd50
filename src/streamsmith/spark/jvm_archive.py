"""A class-data-sharing (CDS) archive of Spark's classes, so a driver JVM starts warm.

A fresh ``local[*]`` session spends most of its first ten seconds loading and verifying
some twenty thousand classes from Spark's jars; every ``streamsmith run``, ``backfill``,
``query`` and scheduled ``available-now`` catch-up pays it again. Java 17 can record the
classes one run loaded into an archive (``-XX:ArchiveClassesAtExit``) and map it into the
next JVM (``-XX:SharedArchiveFile``): measured here, session start 9-11 s → 5-6 s and the
first query 5 s → 2.4 s.

An archive is only valid for the JVM and the exact classpath that wrote it, so its file
name carries a digest of both (the java binary, Spark's jars, ``SPARK_DIST_CLASSPATH``);
after an upgrade the old one is simply not found. A JVM handed a stale archive anyway
says so in one line and starts without it: the archive only ever changes speed.

``streamsmith jvm build`` (run by ``make setup``) records one; sessions use it when it
exists. ``STREAMSMITH_JVM_ARCHIVE=off`` turns it off, ``STREAMSMITH_CACHE`` moves it.
This module only names paths and options; the recording run lives with the CLI.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from streamsmith.spark.jars import OWN, cache_dir, driver_jars, installed, spark_jars

# An archive no JVM has mapped for this long belongs to a checkout or virtualenv gone (or
# idle): `jvm build` deletes it. A checkout that comes back maps no archive (a slower
# start, nothing else) until its next `jvm build`.
IDLE_DAYS = 14
RECORD_ENV = "STREAMSMITH_JVM_ARCHIVE_RECORD"  # set by the builder: record into this file
SWITCH_ENV = "STREAMSMITH_JVM_ARCHIVE"  # "off" disables the archive


def java_binary() -> Path | None:
    """The java Spark's launcher runs: ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_path() -> Path | None:
    """The archive for this machine's java and Spark classpath (whether or not it has
    been built), or None when there is no java to key it by."""
    java = java_binary()
    if java is None:
        return None
    digest = hashlib.sha256()
    stat = java.stat()
    digest.update(f"{java}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    jars = spark_jars()
    # The JVM checks the classpath the archive was recorded with, paths, sizes and times
    # included: another checkout's virtualenv (same jars, another folder), or one made
    # again in the same folder (same jars, new times), needs its own archive; else the
    # JVM warns that it cannot use the archive and starts without it.
    digest.update(f"{jars.resolve()}\0".encode())
    if jars.is_dir():
        for jar in sorted(jars.iterdir()):
            stat = jar.stat()
            digest.update(f"{jar.name}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    for jar in _extra_jars():  # the pinned connectors on the driver's classpath
        stat = jar.stat()
        digest.update(f"{jar}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    digest.update(os.environ.get("SPARK_DIST_CLASSPATH", "").encode())
    return cache_dir() / "jvm" / f"spark-{digest.hexdigest()[:16]}.jsa"


def idle_archives(folder: Path, keep: Path, now: float, days: int = IDLE_DAYS) -> list[Path]:
    """The archives in ``folder`` other than ``keep`` that no JVM has read for ``days``
    (by the file's access time, which the kernel moves when a JVM maps it, at most daily
    under ``relatime``; on a ``noatime`` mount, since it was written)."""
    if not folder.is_dir():
        return []
    cutoff = now - days * 86_400
    return sorted(
        path
        for path in folder.glob("spark-*.jsa")
        if path != keep and max(path.stat().st_atime, path.stat().st_mtime) < cutoff
    )


def _extra_jars() -> list[Path]:
    return driver_jars() if installed("spark") and installed(OWN) else []


def java_options(conf: Mapping[str, object]) -> list[str]:
    """The driver JVM options for the archive: record into the builder's file, map the
    built archive, or nothing (off, not built, or a spec that changes the classpath)."""
    if os.environ.get(RECORD_ENV):
        return [f"-XX:ArchiveClassesAtExit={os.environ[RECORD_ENV]}"]
    if os.environ.get(SWITCH_ENV, "").lower() in {"off", "0", "false", "no"}:
        return []
    if conf.get("spark.driver.extraClassPath"):
        return []
    archive = archive_path()
    if archive is None or not archive.is_file():
        return []
    return [f"-XX:SharedArchiveFile={archive}"]


def recording() -> bool:
    """Whether this process is the builder's recording run."""
    return bool(os.environ.get(RECORD_ENV))
