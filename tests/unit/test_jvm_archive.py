"""The JVM class-data-sharing archive: which option a driver JVM gets, and when none."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamsmith.config import SparkSpec
from streamsmith.spark import jars, jvm_archive
from streamsmith.spark.session import default_conf, merged_conf


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(jars.JARS_ENV, str(jars.home()))  # the jars stay where setup put them
    monkeypatch.setenv(jars.CACHE_ENV, str(tmp_path))
    monkeypatch.delenv(jvm_archive.RECORD_ENV, raising=False)
    monkeypatch.delenv(jvm_archive.SWITCH_ENV, raising=False)
    return tmp_path


def built(cache: Path) -> Path:
    archive = jvm_archive.archive_path()
    assert archive is not None and archive.parent == cache / "jvm"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"")
    return archive


def test_a_built_archive_is_mapped_by_every_session(cache: Path) -> None:
    assert jvm_archive.java_options({}) == []  # not built yet: a plain start
    archive = built(cache)
    options = default_conf(SparkSpec())["spark.driver.extraJavaOptions"].split()
    assert options[0].startswith("-Dlog4j2.configurationFile=")
    assert options[1:] == [f"-XX:SharedArchiveFile={archive}"]
    # A spec's own JVM options come after streamsmith's, which stay.
    spec_conf = {"spark.driver.extraJavaOptions": "-XX:+UseParallelGC", "spark.driver.memory": "1g"}
    merged = merged_conf(default_conf(SparkSpec()), spec_conf)
    assert merged["spark.driver.extraJavaOptions"].split() == [*options, "-XX:+UseParallelGC"]
    assert merged["spark.driver.memory"] == "1g"


def test_off_or_another_classpath_starts_without_it(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built(cache)
    assert jvm_archive.java_options({"spark.driver.extraClassPath": "/opt/x.jar"}) == []
    monkeypatch.setenv(jvm_archive.SWITCH_ENV, "off")
    assert jvm_archive.java_options({}) == []


def test_the_recording_run_writes_where_the_builder_said(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(jvm_archive.RECORD_ENV, "/tmp/x.jsa")
    assert jvm_archive.recording()
    assert jvm_archive.java_options({}) == ["-XX:ArchiveClassesAtExit=/tmp/x.jsa"]


def test_the_name_follows_java_and_spark_classpath(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = jvm_archive.archive_path()
    # The same jars in another folder (another checkout's virtualenv): another archive.
    copy = cache / "other-venv/jars"
    copy.mkdir(parents=True)
    jars = jvm_archive.spark_jars
    monkeypatch.setattr(jvm_archive, "spark_jars", lambda: copy)
    assert jvm_archive.archive_path() not in {first, None}
    # The same jars installed again in that folder (new times): another archive.
    (copy / "spark-core.jar").write_bytes(b"jar")
    installed = jvm_archive.archive_path()
    os.utime(copy / "spark-core.jar", ns=(1, 1))
    assert jvm_archive.archive_path() not in {first, installed, None}
    monkeypatch.setattr(jvm_archive, "spark_jars", jars)
    assert jvm_archive.archive_path() == first
    monkeypatch.setenv("SPARK_DIST_CLASSPATH", "/opt/hadoop/*")
    assert jvm_archive.archive_path() not in {first, None}
    monkeypatch.setenv("JAVA_HOME", str(cache / "no-such-jdk"))
    monkeypatch.setenv("PATH", "")
    assert jvm_archive.archive_path() is None
    assert jvm_archive.java_options({}) == []


def test_build_finds_the_archives_no_jvm_mapped_for_two_weeks(tmp_path: Path) -> None:
    now = 1_800_000_000.0
    day = 86_400

    def archive(name: str, idle_days: float) -> Path:
        path = tmp_path / name
        path.write_bytes(b"")
        os.utime(path, (now - idle_days * day, now - 30 * day))  # (access, modification)
        return path

    current = archive("spark-current.jsa", 40)  # just built or in use: always kept
    archive("spark-lately.jsa", 13)
    gone = archive("spark-gone.jsa", 15)
    (tmp_path / "notes.txt").write_text("not an archive")
    os.utime(tmp_path / "notes.txt", (now - 90 * day, now - 90 * day))
    assert jvm_archive.idle_archives(tmp_path, current, now) == [gone]
    assert jvm_archive.idle_archives(tmp_path / "absent", current, now) == []
