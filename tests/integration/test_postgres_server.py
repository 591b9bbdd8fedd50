"""The embedded PostgreSQL server: the CLI a user runs, restarts, and root's limits."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from streamsmith.errors import UserError
from streamsmith.io.postgres.server import (
    PostgresServer,
    postgres_status,
    restart_postgres,
    start_postgres,
)


@pytest.fixture
def open_root() -> Iterator[Path]:
    """A storage root the ``postgres`` user can reach (pytest's tmp_path is private)."""
    base = Path(tempfile.mkdtemp(prefix="streamsmith-db-"))
    base.chmod(0o755)
    try:
        yield base / "root"
    finally:
        streamsmith("db", "stop", "--root", str(base / "root"))
        shutil.rmtree(base, ignore_errors=True)


def streamsmith(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "STREAMSMITH_ROOT"}
    return subprocess.run(
        [sys.executable, "-m", "streamsmith", *args],
        capture_output=True, text=True, check=False, timeout=120, env=env, cwd=cwd,
    )  # fmt: skip


def test_a_storage_root_with_spaces_and_shell_syntax_is_a_path_never_a_command(
    open_root: Path,
) -> None:
    # A folder anyone (also the postgres user, under root) can write in: a command that
    # the shell ran from the path would leave its file here.
    scratch = open_root.parent / "scratch"
    scratch.mkdir(mode=0o777)
    scratch.chmod(0o777)
    root = open_root.parent / "my lake $(touch ran) `touch ran2`"
    try:
        started = streamsmith("db", "start", "--root", str(root), cwd=scratch)
        assert started.returncode == 0, started.stderr
        server = postgres_status(root / "postgres")
        assert server is not None and server.home == (root / "postgres").resolve()
        with psycopg.connect(server.dsn) as conn:
            directory = conn.execute("SHOW data_directory").fetchone()
        assert directory == (str(root / "postgres" / "data"),)
        assert list(scratch.iterdir()) == []  # nothing ran
        assert sorted(p.name for p in open_root.parent.iterdir()) == sorted(["scratch", root.name])
    finally:
        streamsmith("db", "stop", "--root", str(root))


def test_db_start_status_stop_never_print_the_password(open_root: Path) -> None:
    started = streamsmith("db", "start", "--root", str(open_root))
    assert started.returncode == 0, started.stderr
    state = json.loads((open_root / "postgres/server.json").read_text())
    assert oct((open_root / "postgres/server.json").stat().st_mode & 0o777) == "0o600"
    assert f"127.0.0.1:{state['port']}" in started.stdout and "password=***" in started.stdout

    again = streamsmith("db", "start", "--root", str(open_root))  # idempotent: same server
    status = streamsmith("db", "status", "--root", str(open_root))
    with psycopg.connect(f"host=127.0.0.1 port={state['port']} user=streamsmith "
                         f"password={state['password']} dbname=streamsmith") as conn:  # fmt: skip
        assert conn.execute("SELECT 1 + 1").fetchone() == (2,)
    stopped = streamsmith("db", "stop", "--root", str(open_root))
    after = streamsmith("db", "status", "--root", str(open_root))

    assert f"127.0.0.1:{state['port']}" in again.stdout
    assert status.returncode == 0 and "running on" in status.stdout
    assert stopped.stdout.strip() == "stopped"
    assert after.returncode == 1 and "no PostgreSQL server running" in after.stdout
    for result in (started, again, status, stopped, after):
        assert state["password"] not in result.stdout + result.stderr


def test_a_crash_restart_keeps_committed_data(postgres: PostgresServer, pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("CREATE TABLE kept (n int)")
        conn.execute("INSERT INTO kept VALUES (42)")

    restart_postgres(postgres, mode="immediate")

    assert postgres_status(postgres.home) == postgres
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT n FROM kept").fetchall() == [(42,)]


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as another user")
def test_as_root_an_unreachable_home_is_a_clear_error(tmp_path: Path) -> None:
    # pytest's tmp_path sits under /tmp/pytest-of-root, which only root may enter.
    with pytest.raises(
        UserError, match=r"runs as user postgres, who cannot enter /tmp/pytest-of-root"
    ):
        start_postgres(tmp_path / "postgres")
