"""What ``dry-run`` (and ``run``, before any query starts) catches in a pipeline of a
user's own, in-process: each flow analysed by Spark as ``run`` would, nothing written;
one line naming the spec file, the flow and what to fix (exit 2)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from feeds import feed_project
from inprocess import in_project, invoke
from user_project import files_in, project, spec


@pytest.fixture(autouse=True)
def _in_the_project(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Each test in its project's folder, the module ``flows`` of its own folder."""
    in_project(monkeypatch, tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    sys.modules.pop("flows", None)
    yield
    sys.modules.pop("flows", None)


def test_an_expectation_that_is_not_a_boolean_fails_before_any_query_starts(
    tmp_path: Path,
) -> None:
    path = project(tmp_path, spec(expect={"recent": "ts"}))
    result = invoke("run", "--trigger", "available-now")
    assert result.returncode == 2, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert line == (
        f"error: {path}: flows.per_minute: expectation recent ('ts') is a timestamp, not a "
        "boolean: write a condition such as `amount > 0`"
    )


@pytest.mark.parametrize(
    ("flow", "fragment"),
    [
        ({"transform": None, "sql": "SELECT user FROM clicks GROUP BY usr"},
         "flows.per_minute.sql: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or "
         "function parameter with name `usr` cannot be resolved."),
        ({"transform": "flows:misspelled"},
         "flows.per_minute: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, "
         "or function parameter with name `usr` cannot be resolved."),
        ({"expect": {"recent": "tss > now()"}},
         "flows.per_minute: expectation recent ('tss > now()') cannot be judged: "
         "[UNRESOLVED_COLUMN"),
    ],
)  # fmt: skip
def test_dry_run_analyses_each_flow_as_run_would_and_writes_nothing(
    tmp_path: Path, flow: dict[str, object], fragment: str
) -> None:
    """The input folder need not exist yet: nothing is read, nothing written."""
    path = project(tmp_path, spec(**flow))
    (tmp_path / "data/input/clicks").rmdir()
    before = files_in(tmp_path)
    result = invoke("dry-run")
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {path}: {fragment}"), line
    assert files_in(tmp_path) == before
    assert invoke("dry-run", "--plan-only").returncode == 0


def test_dry_run_infers_a_schema_without_storing_it(tmp_path: Path) -> None:
    folder = feed_project(tmp_path, "feed")
    (folder / "part-0.jsonl").write_text('{"id": "a", "n": 1}\n')
    before = files_in(tmp_path)
    result = invoke("dry-run")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "analysed by Spark against its source: flow events"
    assert files_in(tmp_path) == before  # no schema version, warehouse or checkpoint


def test_file_reader_options_are_checked_and_shown_by_dry_run(tmp_path: Path) -> None:
    """``sources.<s>.options`` of a file source: a misspelt reader option is one line
    naming it and the options the format takes; the options given are shown."""
    document = spec(transform="flows:users")  # one Spark's analysis accepts: dry-run runs it
    source = document["sources"]["clicks"]  # type: ignore[index]
    source["options"] = {"timestampFormt": "yyyy/MM/dd HH:mm"}
    path = project(tmp_path, document)
    result = invoke("dry-run")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert str(path) in line and "sources.clicks" in line
    assert "a jsonl source has no option(s) timestampFormt" in line
    assert "its options: timestampFormat, timestampNTZFormat, dateFormat" in line

    source["options"] = {"timestampFormat": "yyyy/MM/dd HH:mm", "allowComments": True}
    project(tmp_path, document)
    result = invoke("dry-run")
    assert result.returncode == 0, result.stderr
    (shown,) = [line for line in result.stdout.splitlines() if "source clicks:" in line]
    assert "options allowComments=true, timestampFormat=yyyy/MM/dd HH:mm" in shown
