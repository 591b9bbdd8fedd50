"""Files streamsmith keeps for itself are created private and exclusively, never through
a symlink another user planted (the PostgreSQL password file, the caches)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from streamsmith.processes import read_own_file, write_new_file


def test_a_new_file_is_private_from_its_first_byte_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0)
    try:
        write_new_file(tmp_path / ".pwfile", b"secret\n")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / ".pwfile").stat().st_mode) == 0o600
    assert read_own_file(tmp_path / ".pwfile") == b"secret\n"


def test_a_planted_symlink_is_neither_written_through_nor_read(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"theirs")
    (tmp_path / "planted").symlink_to(target)

    with pytest.raises(FileExistsError):
        write_new_file(tmp_path / "planted", b"ours")
    with pytest.raises(OSError, match="symbolic links|Too many levels"):
        read_own_file(tmp_path / "planted")
    assert target.read_bytes() == b"theirs"
