"""What the driver does differently for a cluster master, without starting Spark: which
masters keep the driver on loopback, and the package zip shipped to executors."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

import streamsmith
from streamsmith.config import SparkSpec
from streamsmith.spark.session import default_conf, master_on_loopback, package_zip


@pytest.mark.parametrize(
    ("master", "loopback"),
    [
        ("spark://127.0.0.1:7077", True),
        ("spark://localhost:7077,127.0.0.2:7078", True),
        ("spark://[::1]:7077", True),
        ("local-cluster[2,1,1024]", True),
        ("spark://10.0.0.5:7077", False),
        ("spark://127.0.0.1:7077,spark-master:7077", False),
        ("yarn", False),
        ("k8s://https://127.0.0.1:6443", False),
        ("local[2]", False),
    ],
)
def test_a_master_on_loopback_keeps_the_driver_on_loopback(master: str, loopback: bool) -> None:
    assert master_on_loopback(master) is loopback
    conf = default_conf(SparkSpec(master=master))
    if loopback:
        assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
    elif not master.startswith("local"):
        assert "spark.driver.host" not in conf


def test_the_package_zip_holds_the_installed_package_and_is_reused(tmp_path: Path) -> None:
    archive = package_zip(tmp_path)
    assert archive.parent == tmp_path
    names = zipfile.ZipFile(archive).namelist()
    package = Path(streamsmith.__file__).parent
    for module in ("streamsmith/__init__.py", "streamsmith/io/kafka/source.py"):
        assert module in names
        assert zipfile.ZipFile(archive).read(module) == (package.parent / module).read_bytes()
    assert "streamsmith/log4j2.properties" in names  # package data too
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]
    modified = archive.stat().st_mtime_ns
    assert package_zip(tmp_path) == archive  # same content: the cached zip, not rebuilt
    assert archive.stat().st_mtime_ns == modified
    assert [p.name for p in tmp_path.iterdir()] == [archive.name]  # no staging file left
