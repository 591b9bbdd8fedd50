"""``streamsmith init``: a small working pipeline project to start from.

The files are templates in ``streamsmith/templates/init``: a spec, a Python flow, a SQL
flow, sample input, tests (a transform on a static DataFrame, prefix integrity through
``streamsmith.testing``) and a README with the commands.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from streamsmith.errors import UserError

# Where each template goes in the project, for input from files...
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
# ... and from a Kafka topic: the sample is produced to it, the tests start a broker.
_KAFKA_LAYOUT = {
    **{k: v for k, v in _LAYOUT.items() if not k.startswith("data/")},
    "streamsmith.yml": "streamsmith.kafka.yml",
    "sample/clicks.jsonl": "sample.jsonl",
    "tests/conftest.py": "conftest.kafka.py.tmpl",
    "tests/test_pipeline.py": "test_pipeline.kafka.py.tmpl",
    "README.md": "README.kafka.md",
}
SOURCES = {"files": _LAYOUT, "kafka": _KAFKA_LAYOUT}


def init_project(folder: Path, source: str = "files") -> list[Path]:
    """Write the project reading ``source`` (files or kafka) into ``folder`` (new, or
    empty); returns the files written."""
    if source not in SOURCES:
        raise UserError(f"--source {source!r}: choose one of {', '.join(SOURCES)}")
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UserError(f"{folder} exists and is not an empty folder: choose a new one")
    templates = files("streamsmith") / "templates" / "init"
    written = []
    for target, template in SOURCES[source].items():
        path = folder / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((templates / template).read_text(encoding="utf-8"), encoding="utf-8")
        written.append(path)
    return written
