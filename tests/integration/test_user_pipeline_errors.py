"""Mistakes in a pipeline of your own, as its user meets them on the command line: one
line naming the spec file, the flow and what to fix (exit 2), before Spark starts; code
that raises fails the run naming the flow, with the user's own traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from crashing import wait_until
from pyspark.sql import SparkSession

from feeds import deliver, feed_project
from streamsmith.config import Trigger
from streamsmith.io.schema_store import schema_dir, versions
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import PipelineError, run_pipeline
from user_project import project, spec


def streamsmith(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "STREAMSMITH_ROOT"}
    return subprocess.run(
        [sys.executable, "-m", "streamsmith", *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("flow", "fragment"),
    [
        ({"transform": "flowz:per_user"}, "flows.per_minute.transform: no module 'flowz'"),
        ({"transform": "flows:per_usr"}, "flows.per_minute.transform: module 'flows' has no"),
        ({"sql": "SELECT * FROM clicks"}, "a flow runs either a transform or sql, not both"),
        ({"event_time": {"column": "ts", "lateness": "a while"}}, "invalid duration 'a while'"),
        ({"event_time": {"column": "time", "lateness": "1m"}}, "'time' is not a field"),
        ({"expect": {"recent": {"sql": "ts > now()", "action": "mail"}}}, "action"),
        ({"sink": {"format": "parquett", "table": "x"}}, "unknown sink format 'parquett'"),
    ],
)  # fmt: skip
def test_spec_mistakes_are_one_line_naming_file_flow_and_fix(
    tmp_path: Path, flow: dict[str, object], fragment: str
) -> None:
    path = project(tmp_path, spec(**flow))
    result = streamsmith(tmp_path, "dry-run")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert fragment in line and str(path) in line


def test_sql_spark_cannot_analyse_fails_before_any_query_starts(tmp_path: Path) -> None:
    query = "SELECT user, count(*) AS n FROM clicks GROUP BY usr"
    path = project(tmp_path, spec(transform=None, sql=query))
    result = streamsmith(tmp_path, "run", "--trigger", "available-now")
    assert result.returncode == 2, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: {path}: flows.per_minute.sql: [UNRESOLVED_COLUMN")
    assert "`usr`" in line and "Traceback" not in result.stderr
    assert not (tmp_path / "data/tables/per_minute").exists()  # no query started
    # Nothing but that line and the run's own: no log record of Spark's, no stack trace.
    assert [x for x in result.stderr.splitlines() if not x.startswith("running ")] == [line]


def test_no_spec_here_says_how_to_start(tmp_path: Path) -> None:
    result = streamsmith(tmp_path, "run")
    assert result.returncode == 2
    assert "no streamsmith.yml here" in result.stderr and "streamsmith init" in result.stderr


def test_code_that_raises_fails_the_run_with_the_users_traceback(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = project(tmp_path, spec(transform="flows:broken"))
    app, pipeline = load_pipeline(path)
    try:
        with pytest.raises(PipelineError) as failed:
            run_pipeline(spark, build_plan(app, pipeline, Trigger("available-now")))
    finally:
        sys.modules.pop("flows", None)
    message = str(failed.value)
    assert "flows.per_minute: the flow's code raised ValueError: no such column: usr" in message
    assert f'File "{tmp_path / "flows.py"}", line 7, in broken' in message
    assert "streamsmith/" not in message  # the user's frames only


def test_query_on_a_name_that_is_no_table_says_so_in_one_line(tmp_path: Path) -> None:
    project(tmp_path, spec())
    result = streamsmith(tmp_path, "query", "SELECT * FROM nosuch")
    assert result.returncode == 2, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "`nosuch` cannot be found" in line
    assert result.stderr.splitlines() == ["on Spark: table nosuch is not a lake table", line]


def test_a_schema_change_that_works_as_designed_prints_nothing_alarming(
    spark: SparkSession, tmp_path: Path
) -> None:
    """add_new_columns stops the batch that meets a new field and runs it again: a Spark
    job fails on purpose, which Spark logs as an error with its stack trace. The first
    catch-up runs in the test's session; the one that meets the field, in its own process."""
    folder = feed_project(tmp_path, "grow")
    deliver(spark, tmp_path, [[{"id": "a", "n": 1}]])
    (folder / "part-1.jsonl").write_text('{"id": "b", "n": 2, "city": "Oslo"}\n')
    result = streamsmith(tmp_path, "run", "--trigger", "available-now")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "grow.events: 1 batches, 1 records read, 1 rows written"
    assert result.stderr.splitlines() == [
        f"running grow: 2 queries, storage root {folder.parents[1]}"
    ]


def test_an_always_on_run_waits_for_the_first_input_to_infer_its_schema(tmp_path: Path) -> None:
    folder = feed_project(tmp_path, "feed")
    log = tmp_path / "stderr.txt"
    env = {k: v for k, v in os.environ.items() if k != "STREAMSMITH_ROOT"}
    command = [sys.executable, "-m", "streamsmith", "run", "--trigger", "interval=1s"]
    with log.open("w") as stderr:
        process = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=stderr,
                                   stdout=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        assert wait_until(process, lambda: "waiting for" in log.read_text(), 120), log.read_text()
        staged = tmp_path / "part-0.jsonl"  # delivered as the docs say: written, then renamed
        staged.write_text('{"id": "a", "n": 1}\n')
        staged.rename(folder / "part-0.jsonl")
        commit = tmp_path / "data/checkpoints/feed/events/commits/0"
        assert wait_until(process, commit.is_file, 300), log.read_text()
        process.send_signal(signal.SIGTERM)  # the CLI, not its JVM: a graceful stop
        assert process.wait(timeout=120) == 0, log.read_text()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    (version,) = versions(schema_dir(tmp_path / "data", "feed", "events"))
    assert version.ddl == "id string, n bigint"
    waiting = [line for line in log.read_text().splitlines() if "waiting for" in line]
    assert waiting == [
        f"waiting for the first input in {folder} to infer the schema of source events"
    ]
    # Stopped between batches, its query's job group had no job to cancel: Spark 4.2
    # warns so, twice per query, about nothing a user can act on.
    assert "Failed to cancel job group" not in log.read_text()
