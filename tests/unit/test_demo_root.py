"""``streamsmith demo --root DIR`` clears only a folder a demo made: never a user's folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamsmith.demo import DEMO_MARKER, fresh_root
from streamsmith.errors import UserError


def test_a_folder_the_demo_did_not_make_is_refused_and_kept(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match=f"was not made by streamsmith demo .*{DEMO_MARKER}"):
        fresh_root(project)
    assert (project / "notes.txt").read_text() == "mine"


def test_the_demos_own_folder_is_cleared_and_marked_again(tmp_path: Path) -> None:
    root = fresh_root(tmp_path / "demo")
    assert root == tmp_path / "demo" and (root / DEMO_MARKER).is_file()
    (root / "output.parquet").write_bytes(b"old run")
    assert sorted(p.name for p in fresh_root(root).iterdir()) == [DEMO_MARKER]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (fresh_root(empty) / DEMO_MARKER).is_file()


def test_cwd_home_and_their_parents_are_refused_even_when_marked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, work = tmp_path / "home", tmp_path / "work" / "project"
    for folder in (home, work):
        folder.mkdir(parents=True)
        (folder / DEMO_MARKER).write_text("planted")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    for given, kind in [
        (Path("."), "is the current directory"),
        (work.parent, "holds the current directory"),
        (home, "is the home directory"),
        (Path("/"), "holds the current directory"),
    ]:
        with pytest.raises(UserError, match=kind):
            fresh_root(given)
    assert (work / DEMO_MARKER).is_file() and (home / DEMO_MARKER).is_file()
