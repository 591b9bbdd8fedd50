"""``sources.<name>.archive`` is refused where it cannot be kept safe, naming the key, and
the plan lists every query that must commit a file before it moves."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from streamsmith.errors import UserError
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.input_archive import check_archive
from streamsmith.runtime.plan import Plan, build_plan

SPEC: dict[str, Any] = {
    "name": "shop",
    "storage_root": "data",
    "trigger": "available-now",
    "sources": {"raw": {"format": "jsonl", "path": "input", "archive": "archive/raw",
                        "schema": "order_id string, customer string, amount int"}},
    "flows": {
        "orders": {"source": "raw", "sql": "SELECT * FROM raw", "sink": {"table": "orders"}},
        "big": {"source": "raw", "sql": "SELECT * FROM raw WHERE amount > 6",
                "sink": {"table": "big"}, "enabled": False},
    },
}  # fmt: skip


def plan_of(folder: Path, *sets: str, document: dict[str, Any] | None = None) -> Plan:
    (folder / "data/input").mkdir(parents=True, exist_ok=True)
    (folder / "streamsmith.yml").write_text(yaml.safe_dump(document or SPEC))
    return build_plan(*load_pipeline(folder / "streamsmith.yml", sets=sets))


def test_every_query_reading_the_source_is_a_reader(tmp_path: Path) -> None:
    (archive,) = plan_of(tmp_path).archives
    checkpoints = tmp_path / "data/checkpoints/shop"
    assert archive.path == tmp_path / "data/input"
    assert archive.archive == tmp_path / "data/archive/raw"
    # The planned flow's table and quarantine, and the disabled flow's table once it ran.
    assert archive.readers == (checkpoints / "orders", checkpoints / "orders__quarantine")
    assert archive.paused == (checkpoints / "big",)
    assert not plan_of(tmp_path, "sources.raw.archive=null").archives
    described = plan_of(tmp_path).flows[0].input.describe()
    assert described == (
        f"jsonl files in {tmp_path}/data/input (read files move to {tmp_path}/data/archive/raw)"
    )


@pytest.mark.parametrize(
    ("setting", "error"),
    [
        ("sources.raw.archive=input/done", "must not contain one another"),
        ("sources.raw.archive=.", "must not contain one another"),
        ("sources.raw.format=parquet", "archive moves a file source's files once read"),
    ],
)
def test_an_archive_that_cannot_be_kept_safe_is_refused(
    tmp_path: Path, setting: str, error: str
) -> None:
    with pytest.raises(UserError) as raised:
        plan_of(tmp_path, setting)
    assert "sources.raw" in str(raised.value) and error in str(raised.value)


def test_a_source_read_by_a_flow_with_several_inputs_is_refused(tmp_path: Path) -> None:
    document = copy.deepcopy(SPEC)
    document["sources"]["more"] = {"format": "jsonl", "path": "more", "schema": "order_id string"}
    document["flows"]["big"] = {
        "source": "raw", "streams": {"more": "more"}, "sink": {"table": "big"},
        "sql": "SELECT raw.* FROM raw JOIN more USING (order_id)",
    }  # fmt: skip
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(document))
    _, spec = load_pipeline(tmp_path / "streamsmith.yml")
    with pytest.raises(UserError, match="flow.s. big read several sources"):
        check_archive(spec, "raw")
