"""The tutorial "Your first pipeline" (docs/tutorials/first-pipeline.md), executed: every
command of its bash blocks in order, as its reader types them, with the spec its yaml
block gives; then the results each step promises."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from deltalake import DeltaTable
from tutorials import VENV, Shell, follow, run

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs/tutorials/first-pipeline.md"
# The windows the stream has closed (the watermark: 10:12 less 5 minutes), as
# (window end, user, clicks): the records failing the expectations are not among them.
CLOSED = [
    ("10:01", "ann", 2), ("10:01", "bob", 1), ("10:02", "bob", 1), ("10:02", "cid", 1),
    ("10:03", "ann", 1), ("10:03", "cid", 1), ("10:04", "bob", 1), ("10:05", "ann", 1),
    ("10:06", "dee", 1),
]  # fmt: skip


def windows(table: Path) -> list[tuple[str, str, int]]:
    frame = DeltaTable(str(table)).to_pyarrow_table().to_pandas()
    return sorted(
        (str(row.window_end)[11:16], str(row.user), int(row.clicks))
        for row in frame.itertuples(index=False)
    )


@pytest.fixture
def home() -> Iterator[Path]:
    """A folder the tutorial starts in. Made with mkdtemp and opened to others: as root,
    PostgreSQL runs as the ``postgres`` user, who cannot enter pytest's private temp
    folders. The tutorial stops its database; should it fail before, it is stopped here."""
    from streamsmith.io.postgres.server import embedded_home, postgres_status, stop_postgres

    base = Path(tempfile.mkdtemp(prefix="streamsmith-tutorial-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        pg = embedded_home(base / "clicks/data")
        if postgres_status(pg) is not None:
            stop_postgres(pg, "immediate")
        shutil.rmtree(base)


def test_the_first_pipeline_tutorial_runs_as_written(home: Path) -> None:
    cwd = home

    def data() -> Path:  # the project's storage root, once the tutorial is in it
        return cwd / "data"

    checks: dict[str, Callable[[subprocess.CompletedProcess[str]], None]] = {
        "streamsmith dry-run": lambda r: assert_in(
            "flow clicks_per_minute: pipeline:clicks_per_window", r.stdout
        ),
        "streamsmith run --trigger available-now": lambda r: assert_equal(
            (windows(data() / "tables/clicks_per_minute")[:2], warnings(r.stderr)),
            (CLOSED[:2], []),  # nothing a user cannot act on: the JVM's notes are filtered
        ),
        "pytest": lambda r: assert_in("2 passed", r.stdout),
        "streamsmith status": lambda r: assert_in("plausible_latency", r.stdout),
    }
    ran = []
    (home / ".venv").symlink_to(VENV)  # the checkout, where `make setup` made it
    for text, cwd, result in follow(TUTORIAL.read_text(encoding="utf-8"), home, Shell.fresh()):
        if text in checks:
            checks[text](result)
        if text.startswith("streamsmith query"):
            assert re.search(r"10:00:00\s*│\s*ann\s*│\s*2", result.stdout), result.stdout
        if text == "streamsmith status":  # the database still runs: look at its table
            assert_slow_clicks_in_postgres(data())
            assert_expectation_counts(run("streamsmith status --format json", cwd).stdout)
        ran.append(text)
    assert ran[:2] == ["source .venv/bin/activate", "streamsmith init clicks"]
    assert ran[-1] == "streamsmith db stop"

    # After the expectations: the same windows; the failing records are accounted for.
    tables = data() / "tables"
    assert windows(tables / "clicks_per_minute") == CLOSED
    reasons = (
        DeltaTable(str(tables / "clicks_per_minute_quarantine"))
        .to_pyarrow_table()
        .column("reason")
        .to_pylist()
    )
    assert sorted(reasons) == [
        "expectation known_page failed",
        'field ts: "not a time" is not a timestamp (ISO 8601, e.g. 2001-01-06T15:01:00; set '
        "options.timestampFormat)",
        "missing or invalid field user",
    ]  # fmt: skip
    backfilled = windows(data() / "backfill/clicks_per_minute")
    assert [row for row in backfilled if row[0] <= "10:07"] == CLOSED  # the same code, batch


def assert_slow_clicks_in_postgres(root: Path) -> None:
    from streamsmith.io.postgres.server import embedded_home, postgres_status

    server = postgres_status(embedded_home(root))
    assert server is not None
    with psycopg.connect(server.dsn) as conn:
        rows = conn.execute('SELECT "user", ms FROM slow_clicks ORDER BY ms').fetchall()
    assert [(str(user), ms) for user, ms in rows] == [("ann", 1400), ("ann", 1800), ("bob", 2100)]


def assert_expectation_counts(status: str) -> None:
    """Of the 15 records parsed, one has a negative latency, one a page not under /."""
    by_query = {row["query"]: row for row in map(json.loads, status.splitlines())}
    assert by_query["clicks.clicks_per_minute"]["expectations"] == {
        "plausible_latency": {"passed": 14, "failed": 1},
        "known_page": {"passed": 14, "failed": 1},
    }


def assert_in(part: str, text: str) -> None:
    assert part in text, text[-3000:]


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("WARNING")]


def assert_equal(got: object, expected: object) -> None:
    assert got == expected


def test_the_readmes_first_commands_run_in_a_fresh_shell(tmp_path: Path) -> None:
    """After `make setup`, in a new terminal in the checkout (its `.venv`), the README's
    first commands work as printed, up to the first that starts Spark (the tutorial's
    test runs those)."""
    (tmp_path / ".venv").symlink_to(VENV)  # the checkout, where `make setup` made it
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Your first pipeline", 1)[1].split("```bash\n", 1)[1]
    first = []
    for line in block.split("```", 1)[0].splitlines():
        if line.startswith("streamsmith run"):
            break
        first.append(line)
    ran = [(command, cwd) for command, cwd, _ in follow(
        "```bash\n" + "\n".join(first) + "\n```\n", tmp_path, Shell.fresh())]  # fmt: skip
    assert ran[-1] == ("streamsmith init clicks", tmp_path)
    assert (tmp_path / "clicks/streamsmith.yml").is_file()
