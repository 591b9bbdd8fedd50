"""The conf a driver JVM gets from a file instead of its command line: which keys are
credentials, and the file java.util.Properties reads them back from."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from streamsmith.spark import auth
from streamsmith.spark.session import is_credential


@pytest.mark.parametrize(
    "key",
    [
        "spark.hadoop.fs.s3a.secret.key",
        "spark.hadoop.fs.s3a.access.key",
        "spark.hadoop.fs.s3a.session.token",
        "spark.authenticate.secret",
        "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net",
        "spark.hadoop.fs.azure.sas.box.acct.blob.core.windows.net",
        "spark.hadoop.fs.gs.auth.service.account.private.key",
        "spark.ssl.keyPassword",
    ],
)
def test_credentials_are_known_by_their_keys(key: str) -> None:
    assert is_credential(key)


@pytest.mark.parametrize(
    "key",
    [
        "spark.sql.shuffle.partitions",
        "spark.hadoop.fs.s3a.endpoint",
        "spark.io.encryption.keySizeBits",
    ],
)
def test_ordinary_conf_stays_ordinary(key: str) -> None:
    assert not is_credential(key)


def test_the_properties_file_is_private_and_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMSMITH_CACHE", str(tmp_path / "cache"))
    path = auth.driver_properties({"spark.a=b": " two\nlines\\"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == "spark.a\\=b=\\ two\\nlines\\\\\n"
