"""Hadoop's local file system as a local session has it (``spark/java/LocalFileSystemInJvm``):
permissions and link checks in the JVM instead of a ``chmod`` or ``readlink`` process,
with Hadoop's results, through both of Hadoop's file APIs (``FileSystem``, which Spark's
writers use, and ``FileContext``, through which checkpoint files and Delta commits are
renamed into place)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession


def hadoop(spark: SparkSession) -> tuple[Any, Any, Any]:
    jvm = spark._jvm
    assert jvm is not None
    return jvm, spark._jsc.hadoopConfiguration(), jvm.org.apache.hadoop.fs  # type: ignore[union-attr]


def test_a_local_session_s_file_systems_are_streamsmith_s(spark: SparkSession) -> None:
    jvm, conf, fs = hadoop(spark)
    files = fs.FileSystem.get(jvm.java.net.URI("file:///"), conf)
    context = fs.FileContext.getFileContext(jvm.java.net.URI("file:///"), conf)
    assert files.getClass().getName() == "io.streamsmith.fs.LocalFileSystemInJvm"
    assert files.getRaw().getClass().getName() == "io.streamsmith.fs.LocalFileSystemInJvm$Raw"
    assert context.getDefaultFileSystem().getClass().getName() == "io.streamsmith.fs.LocalFsInJvm"


def test_files_folders_links_and_renames_come_out_as_with_hadoop_s_own(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The same calls through Hadoop's own local file system (``chmod`` and ``readlink``
    processes) and through the local session's, each in a folder of its own."""
    jvm, conf, fs = hadoop(spark)
    ours = fs.FileSystem.get(jvm.java.net.URI("file:///"), conf)
    hadoops = fs.LocalFileSystem()
    hadoops.initialize(jvm.java.net.URI("file:///"), conf)

    def outcome(files: Any, root: Path) -> dict[str, object]:
        def at(name: str) -> Any:
            return fs.Path((root / name).as_uri())

        root.mkdir()
        assert files.mkdirs(at("folder"), fs.permission.FsPermission("750"))
        stream = files.create(at("folder/a.txt"), fs.permission.FsPermission("640"), False,
                              4096, 1, 1 << 20, None)  # fmt: skip
        stream.write(b"abc")
        stream.close()
        assert files.mkdirs(at("shared"), fs.permission.FsPermission("777"))
        files.setPermission(at("shared"), fs.permission.FsPermission("1777"))  # sticky
        files.setPermission(at("folder/a.txt"), fs.permission.FsPermission("600"))
        os.symlink(root / "folder/a.txt", root / "link")
        statuses = {
            name: files.getFileLinkStatus(at(name)) for name in ("folder", "folder/a.txt", "link")
        }
        with pytest.raises(Py4JJavaError, match="FileNotFoundException"):
            files.getFileLinkStatus(at("absent"))
        return {
            "modes": {
                str(path.relative_to(root)): oct(stat.S_IMODE(path.lstat().st_mode))
                for path in sorted(root.rglob("*"))
                if not path.is_symlink()
            },
            "statuses": {
                name: (status.isDirectory(), status.isSymlink(), status.getLen())
                for name, status in statuses.items()
            },
        }

    expected = outcome(hadoops, tmp_path / "hadoop")
    assert outcome(ours, tmp_path / "ours") == expected
    assert expected["modes"] == {
        "folder": "0o750", "folder/.a.txt.crc": "0o600", "folder/a.txt": "0o600",
        "shared": "0o1777",
    }  # fmt: skip


def test_a_rename_never_replaces_a_commit(spark: SparkSession, tmp_path: Path) -> None:
    jvm, conf, fs = hadoop(spark)
    context = fs.FileContext.getFileContext(jvm.java.net.URI("file:///"), conf)
    target = tmp_path / "00000000000000000001.json"
    target.write_text("{}\n")
    # Delta's commit: a temporary file renamed onto a version that must not exist yet.
    attempt = tmp_path / ".00000000000000000001.json.tmp"
    attempt.write_text('{"other": 1}\n')
    none = spark.sparkContext._gateway.new_array(jvm.org.apache.hadoop.fs.Options.Rename, 1)
    none[0] = jvm.org.apache.hadoop.fs.Options.Rename.NONE
    with pytest.raises(Py4JJavaError, match="FileAlreadyExistsException"):
        context.rename(fs.Path(attempt.as_uri()), fs.Path(target.as_uri()), none)
    assert target.read_text() == "{}\n"
    fresh = tmp_path / "00000000000000000002.json"
    context.rename(fs.Path(attempt.as_uri()), fs.Path(fresh.as_uri()), none)
    assert fresh.read_text() == '{"other": 1}\n' and not attempt.exists()
