"""What the driver does differently for a cluster master, without starting Spark: which
masters keep the driver on loopback, and the package zip shipped to executors; and what of
the JVM's stderr reaches the user."""

from __future__ import annotations

import os
import stat
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
    folder = tmp_path / "pyfiles"
    archive = package_zip(folder)
    assert archive.parent == folder
    names = zipfile.ZipFile(archive).namelist()
    package = Path(streamsmith.__file__).parent
    for module in ("streamsmith/__init__.py", "streamsmith/io/kafka/source.py"):
        assert module in names
        assert zipfile.ZipFile(archive).read(module) == (package.parent / module).read_bytes()
    assert "streamsmith/log4j2.properties" in names  # package data too
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]
    modified = archive.stat().st_mtime_ns
    assert package_zip(folder) == archive  # same content: the cached zip, not rebuilt
    assert archive.stat().st_mtime_ns == modified
    assert [p.name for p in folder.iterdir()] == [archive.name]  # no staging file left


def test_the_package_zip_lives_in_a_folder_of_the_cache_only_its_user_can_enter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMSMITH_CACHE", str(tmp_path / "cache"))
    archive = package_zip()
    assert archive.parent == tmp_path / "cache" / "pyfiles"
    assert stat.S_IMODE(archive.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600


def test_a_zip_planted_under_the_expected_name_is_replaced_not_shipped(tmp_path: Path) -> None:
    folder = tmp_path / "pyfiles"
    name = package_zip(folder).name
    for planted in folder.iterdir():
        planted.unlink()
    with zipfile.ZipFile(folder / name, "w") as zipped:
        zipped.writestr("streamsmith/__init__.py", "import os; os.system('id')\n")
    (folder / "elsewhere.zip").write_bytes(b"not ours")

    archive = package_zip(folder)

    package = Path(streamsmith.__file__).parent
    shipped = zipfile.ZipFile(archive).read("streamsmith/__init__.py")
    assert shipped == (package / "__init__.py").read_bytes()
    (folder / name).unlink()
    (folder / name).symlink_to(folder / "elsewhere.zip")  # a planted symlink: replaced too
    assert zipfile.ZipFile(package_zip(folder)).read("streamsmith/__init__.py") == shipped
    assert (folder / "elsewhere.zip").read_bytes() == b"not ours"


def test_the_package_zip_refuses_a_folder_others_can_enter_or_own(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(PermissionError, match="open to other users"):
        package_zip(shared)
    assert not list(shared.iterdir())
    if os.geteuid() == 0:  # only root can give a folder away
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o700)
        os.chown(theirs, 65534, 65534)
        with pytest.raises(PermissionError, match="belongs to user id 65534"):
            package_zip(theirs)


def test_the_jvm_log_of_a_query_stopped_to_add_a_field_is_dropped_and_nothing_else() -> None:
    from streamsmith.spark.session import _stopped_on_purpose

    header = b"10:00:00 ERROR MicroBatchExecution: Query a.f [id = 1] terminated with error\n"
    stopped = [
        header,
        b"org.apache.spark.SparkRuntimeException: [USER_RAISED_EXCEPTION] streamsmith: new "
        b'fields {"fields":["city"]} :streamsmith SQLSTATE: P0001\n',
        b"\tat org.apache.spark.Foo(Foo.scala:1)\n",
        b"Caused by: java.lang.RuntimeException: x\n",
        b"\t... 12 more\n",
    ]
    failed = [header, b"java.io.IOException: disk full\n", b"\tat java.io.File(File.java:1)\n"]
    after = [b"10:00:01 WARN Other: something else\n"]
    assert list(_stopped_on_purpose([*stopped, *after])) == after
    assert list(_stopped_on_purpose([*failed, *after])) == [*failed, *after]
    assert list(_stopped_on_purpose([header])) == [header]  # its cause not yet written
    # On Delta the write's abort is logged first, the stop wrapped in TASK_WRITE_FAILED.
    aborted = [
        b"10:00:00 ERROR DeltaFileFormatWriter: Job job_1 aborted.\n",
        b"10:00:00 ERROR DeltaFileFormatWriter: Aborting job 499f\n",
        b"org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing\n",
        b"\tat org.apache.spark.Foo(Foo.scala:1)\n",
        b"Caused by: org.apache.spark.SparkRuntimeException: [USER_RAISED_EXCEPTION] "
        b'streamsmith: new fields {"fields":["city"]} :streamsmith\n',
        header,
        b"org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing\n",
        b"Caused by: org.apache.spark.SparkRuntimeException: [USER_RAISED_EXCEPTION] "
        b'streamsmith: new fields {"fields":["city"]} :streamsmith\n',
    ]
    assert list(_stopped_on_purpose([*aborted, *after])) == after
