"""The secrets of the Spark servers streamsmith starts: per user, per address, 0600."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from streamsmith.spark import auth, jars


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(jars.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_new_secret_is_private_and_found_by_the_servers_address(cache: Path) -> None:
    path, secret = auth.new_secret(auth.CLUSTER, "spark://127.0.0.1:7077", "s={secret}\n")
    assert path == cache / "secrets" / "cluster" / "127.0.0.1-7077"
    assert path.read_text() == f"s={secret}\n" and len(secret) == 64
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert auth.existing_secret(auth.CLUSTER, "spark://127.0.0.1:7077") == path
    assert auth.existing_secret(auth.SQL_SERVER, "127.0.0.1:7077") is None  # another kind
    again, other = auth.new_secret(auth.CLUSTER, "spark://127.0.0.1:7077")
    assert again == path and other != secret  # a restart on the port replaces it
    auth.forget_secret(auth.CLUSTER, "spark://127.0.0.1:7077")
    assert auth.existing_secret(auth.CLUSTER, "spark://127.0.0.1:7077") is None


def test_a_planted_symlink_is_never_read_nor_written_through(cache: Path, tmp_path: Path) -> None:
    folder = auth.secret_path(auth.SQL_SERVER, "127.0.0.1:10000").parent
    target = tmp_path / "elsewhere"
    target.write_text("planted")
    (folder / "127.0.0.1-10001").symlink_to(target)
    with pytest.raises(OSError):
        auth.existing_secret(auth.SQL_SERVER, "127.0.0.1:10001")
    path, _ = auth.new_secret(auth.SQL_SERVER, "127.0.0.1:10001")  # replaces the link
    assert not path.is_symlink() and target.read_text() == "planted"


def test_a_folder_open_to_others_is_refused(cache: Path) -> None:
    folder = cache / "secrets" / "cluster"
    folder.mkdir(parents=True)
    folder.chmod(0o755)
    with pytest.raises(PermissionError, match="open to other users"):
        auth.new_secret(auth.CLUSTER, "spark://127.0.0.1:7077")
