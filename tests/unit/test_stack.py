"""The version set is pinned in one place and everything agrees with it."""

from __future__ import annotations

import json
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pyspark
import pytest

from streamsmith.errors import UserError
from streamsmith.spark import jars, stack

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_pins_the_stack_pyspark_and_delta() -> None:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"pyspark=={stack.SPARK}" in dependencies
    assert f"delta-spark=={stack.DELTA}" in dependencies


def test_the_lock_and_the_installed_wheels_are_the_stack() -> None:
    lock = (ROOT / "requirements.lock").read_text()
    assert f"\npyspark=={stack.SPARK} " in lock
    assert f"\ndelta-spark=={stack.DELTA} " in lock
    assert pyspark.__version__ == stack.SPARK
    assert metadata.version("delta-spark") == stack.DELTA


def test_the_delta_jar_is_built_for_the_spark_minor() -> None:
    (delta,) = [a for a in stack.SPARK_EXTRAS if a.group == "io.delta"]
    assert delta.name == f"delta-spark_{stack.SPARK.rsplit('.', 1)[0]}_{stack.SCALA}"
    assert all(
        a.version == stack.SPARK for a in stack.SPARK_EXTRAS if a.group == "org.apache.spark"
    )


def test_the_fetched_groups_hold_every_pinned_artifact_with_its_digest() -> None:
    """``make setup`` fetched them (``streamsmith jvm fetch``): each group's manifest names
    its artifacts, and every jar it lists is there, with its SHA-256."""
    for group, artifacts in stack.GROUPS.items():
        manifest = json.loads((jars.home() / group / jars.MANIFEST).read_text())
        assert manifest["artifacts"] == [a.coordinates() for a in artifacts]
        files = jars.group_jars(group)
        assert files and all(path.is_file() for path in files)
        assert sorted(manifest["sha256"]) == sorted(path.name for path in files)
        for artifact in artifacts:
            assert any(path.name.startswith(f"{artifact.name}-") for path in files), artifact


def test_the_spark_group_leaves_out_what_the_wheel_ships() -> None:
    wheel = {jars._base_name(path.name) for path in jars.spark_jars().glob("*.jar")}
    ours = {jars._base_name(path.name) for path in jars.group_jars("spark")}
    assert not wheel & ours


def test_a_missing_group_names_the_command_that_fetches_it(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="streamsmith jvm fetch"):
        jars.group_jars("spark", tmp_path)


def test_streamsmiths_own_jar_holds_its_classes_for_the_driver_and_the_executors() -> None:
    (own,) = jars.group_jars(jars.OWN)
    with zipfile.ZipFile(own) as jar:
        assert "io/streamsmith/auth/SecretAuthenticator.class" in jar.namelist()
        assert "io/streamsmith/lines/NumberedLinesFormat.class" in jar.namelist()
    conf = jars.session_conf()
    assert str(own) in conf["spark.driver.extraClassPath"].split(":")
    assert str(own) in conf["spark.jars"].split(",")  # the line reader runs in tasks
    # its source is part of the version set's digest: a changed class is compiled afresh
    source = ROOT / "src/streamsmith/spark/java/SecretAuthenticator.java"
    assert ("SecretAuthenticator.java", source.read_bytes()) in jars._java_sources()


def test_hadoop_aws_matches_the_wheels_hadoop_and_brings_s3_not_the_sdk_bundle() -> None:
    """S3A must be the Hadoop the wheel runs; of the AWS SDK only S3 and its transfer
    manager come along, not the ~600 MB bundle hadoop-aws asks for."""
    assert (jars.spark_jars() / f"hadoop-client-api-{stack.HADOOP}.jar").is_file()
    names = {jars._base_name(path.name) for path in jars.group_jars("spark")}
    assert {"hadoop-aws", "s3", "s3-transfer-manager", "apache-client"} <= names
    assert "bundle" not in names
    assert f"-{stack.AWS_SDK}.jar" in " ".join(path.name for path in jars.group_jars("spark"))


def test_the_build_tools_are_locked_and_hashed_too() -> None:
    """``make setup`` builds streamsmith's editable install with the locked build backend
    (``--no-build-isolation``), not with whatever version pip would fetch unpinned and
    unhashed into an isolated build environment."""
    import re

    lock = (ROOT / "requirements.lock").read_text()
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for requirement in build:
        name = re.split(r"[<>=!~ \[;]", requirement, maxsplit=1)[0]
        assert re.search(rf"\n{name}==[\w.]+ \\\n    --hash=sha256:", lock), requirement
    makefile = (ROOT / "Makefile").read_text()
    editable = [line for line in makefile.splitlines() if " -e ." in line]
    assert editable and all("--no-build-isolation" in line for line in editable), editable
    # uv, which installs the lock, comes from the lock's own hashes (pip checks them).
    assert re.search(r"\nuv==[\w.]+ \\\n    --hash=sha256:", lock)
    assert "pip install -q --require-hashes --no-deps -r <($(UV_PIN))" in makefile
