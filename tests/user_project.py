"""A user's own clicks pipeline with a Python module of flows, for the tests of the
mistakes a user makes in one (tests/integration/test_user_pipeline_errors.py, one
process per command, and tests/streaming/test_user_pipeline_checks.py, in-process)."""

from __future__ import annotations

from pathlib import Path

import yaml

CODE = """
def per_user(clicks):
    return clicks.groupBy("window", "user").count()


def broken(clicks):
    raise ValueError("no such column: usr")


def misspelled(clicks):
    return clicks.select("usr")


def users(clicks):
    return clicks.select("user", "ts")
"""


def spec(**flow: object) -> dict[str, object]:
    return {
        "name": "clicks",
        "storage_root": "data",
        "sources": {"clicks": {"format": "jsonl", "path": "input/clicks",
                               "schema": "user string, ts timestamp"}},
        "flows": {"per_minute": {"source": "clicks", "sink": {"table": "per_minute"},
                                 "transform": "flows:per_user", **flow}},
    }  # fmt: skip


def project(folder: Path, document: dict[str, object]) -> Path:
    (folder / "data/input/clicks").mkdir(parents=True, exist_ok=True)
    (folder / "flows.py").write_text(CODE)
    (folder / "streamsmith.yml").write_text(yaml.safe_dump(document))
    return folder / "streamsmith.yml"


def files_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if "__pycache__" not in p.parts)
