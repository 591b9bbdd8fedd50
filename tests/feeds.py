"""A one-source project fed by hand, for the tests of files that change or break."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pyspark.sql import SparkSession

from streamsmith.config import Trigger
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import run_pipeline


def feed_project(tmp_path: Path, name: str, **source: object) -> Path:
    """A pipeline over one JSON-lines source (inferred unless ``schema`` is given)
    copying it to table ``events``; returns the source's input folder."""
    spec = {
        "name": name,
        "storage_root": "data",
        "sources": {"events": {"format": "jsonl", "path": "input/events", "schema": "infer",
                               "required": ["id"], **source}},
        "flows": {"events": {"sql": "SELECT * FROM events", "sink": {"table": "events"}}},
    }  # fmt: skip
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(spec))
    folder = tmp_path / "data/input/events"
    folder.mkdir(parents=True)
    return folder


def deliver(spark: SparkSession, tmp_path: Path, deliveries: list[list[dict[str, Any]]]) -> None:
    """Each delivery as one more file of the project's input, then a catch-up run."""
    folder = tmp_path / "data/input/events"
    for number, records in enumerate(deliveries):
        lines = [json.dumps(record) for record in records]
        (folder / f"part-{number}.jsonl").write_text("\n".join(lines) + "\n")
        app, pipeline = load_pipeline(tmp_path / "streamsmith.yml")
        run_pipeline(spark, build_plan(app, pipeline, Trigger("available-now")))
