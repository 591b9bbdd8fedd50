"""``streamsmith init``: a small working pipeline project to start from.

The files are templates in ``streamsmith/templates/init``: a spec, a Python flow, a SQL
flow, sample input, tests (a transform on a static DataFrame, prefix integrity through
``streamsmith.testing``) and a README with the commands.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from streamsmith.errors import UserError

# Where each template goes in the project.
_LAYOUT = {
    "streamsmith.yml": "streamsmith.yml",
    "pipeline.py": "pipeline.py.tmpl",
    "flows/slow_clicks.sql": "slow_clicks.sql",
    "data/input/clicks/sample.jsonl": "sample.jsonl",
    "tests/conftest.py": "conftest.py.tmpl",
    "tests/test_pipeline.py": "test_pipeline.py.tmpl",
    "pyproject.toml": "pyproject.toml",
    ".gitignore": "gitignore",
    "README.md": "README.md",
}


def init_project(folder: Path) -> list[Path]:
    """Write the project into ``folder`` (new, or empty); returns the files written."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UserError(f"{folder} exists and is not an empty folder: choose a new one")
    templates = files("streamsmith") / "templates" / "init"
    written = []
    for target, template in _LAYOUT.items():
        path = folder / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((templates / template).read_text(encoding="utf-8"), encoding="utf-8")
        written.append(path)
    return written
