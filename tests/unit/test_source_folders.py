"""A relative source ``path`` is found from the spec file's folder, as ``libraries``
globs and ``sql`` files are: input kept beside the spec is read whatever ``--root`` a run
gets. Where no such folder is there, it is under the storage root, as before (the
reference apps, ``streamsmith generate`` and older projects keep their input there)."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.describe import describe_plan
from streamsmith.runtime.plan import build_plan

SPEC = {
    "name": "census",
    "storage_root": "data",
    "sources": {"figures": {"format": "jsonl", "path": "input/figures",
                            "schema": "country string, year int"}},
    "flows": {"figures": {"sql": "SELECT * FROM figures", "sink": {"table": "figures"}}},
}  # fmt: skip
PIPELINE = """
import streamsmith as ss

pipeline = ss.Pipeline("census", sources={"figures": {
    "format": "jsonl", "path": "input/figures", "schema": "country string, year int"}})


@pipeline.flow(source="figures", sink={"table": "figures"})
def figures(figures):
    return figures
"""


def source_folder(spec_file: Path, root: Path | None = None) -> tuple[Path | None, str]:
    app, spec = load_pipeline(spec_file, storage_root=None if root is None else str(root))
    plan = build_plan(app, spec)
    return plan.flows[0].source_path, describe_plan(plan)


def test_input_beside_the_spec_is_read_under_any_root(tmp_path: Path) -> None:
    project = tmp_path / "census"
    (project / "input/figures").mkdir(parents=True)
    (project / "streamsmith.yml").write_text(yaml.safe_dump(SPEC))
    (project / "census_pipeline.py").write_text(PIPELINE)
    for spec_file in (project / "streamsmith.yml", project / "census_pipeline.py"):
        for root in (None, tmp_path / "fresh-root"):
            try:
                folder, shown = source_folder(spec_file, root)
            finally:
                sys.modules.pop("census_pipeline", None)
            assert folder == project / "input/figures"
            # dry-run prints the absolute folder the source reads
            assert f"  source figures: jsonl files in {project / 'input/figures'}\n" in shown


def test_without_it_the_input_is_under_the_storage_root_as_before(tmp_path: Path) -> None:
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(SPEC))
    (tmp_path / "data/input/figures").mkdir(parents=True)
    assert source_folder(tmp_path / "streamsmith.yml")[0] == tmp_path / "data/input/figures"
    (tmp_path / "data/input/figures").rmdir()  # nothing delivered yet: still the root
    assert source_folder(tmp_path / "streamsmith.yml")[0] == tmp_path / "data/input/figures"
    other = tmp_path / "other-root"
    assert source_folder(tmp_path / "streamsmith.yml", other)[0] == other / "input/figures"
