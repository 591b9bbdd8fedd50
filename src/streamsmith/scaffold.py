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
# An SDP project: what ``spark-pipelines init`` writes, plus tests and a README.
_SDP_LAYOUT = {
    "tests/conftest.py": "conftest.py.tmpl",
    "tests/test_transformations.py": "test_transformations.py.tmpl",
    "pyproject.toml": "pyproject.toml",
    ".gitignore": "gitignore",
    "README.md": "README.md",
}


def init_project(folder: Path, source: str = "files") -> list[Path]:
    """Write the project reading ``source`` (files or kafka) into ``folder`` (new, or
    empty); returns the files written."""
    if source not in SOURCES:
        raise UserError(f"--source {source!r}: choose one of {', '.join(SOURCES)}")
    _check_empty(folder)
    return _write(folder, "init", SOURCES[source])


def init_sdp_project(folder: Path) -> list[Path]:
    """Write into ``folder`` (new, or empty) the project ``spark-pipelines init`` makes,
    from PySpark's own templates so the two stay the same (the spec named after the
    folder, its storage ``pipeline-storage/`` as a ``file://`` URI), plus tests and a
    README; returns the files written."""
    from pyspark.pipelines import init_cli

    _check_empty(folder)
    storage = (folder / "pipeline-storage").resolve()
    storage.mkdir(parents=True)
    spec = init_cli.SPEC.replace("{{ name }}", folder.resolve().name)
    sdp = {
        "spark-pipeline.yml": spec.replace("{{ storage_root }}", f"file://{storage}"),
        "transformations/example_python_materialized_view.py": init_cli.PYTHON_EXAMPLE,
        "transformations/example_sql_materialized_view.sql": init_cli.SQL_EXAMPLE,
    }
    written = []
    for target, text in sdp.items():
        path = folder / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written + _write(folder, "init_sdp", _SDP_LAYOUT)


def _check_empty(folder: Path) -> None:
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UserError(f"{folder} exists and is not an empty folder: choose a new one")


def _write(folder: Path, templates_in: str, layout: dict[str, str]) -> list[Path]:
    templates = files("streamsmith") / "templates" / templates_in
    written = []
    for target, template in layout.items():
        path = folder / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((templates / template).read_text(encoding="utf-8"), encoding="utf-8")
        written.append(path)
    return written
