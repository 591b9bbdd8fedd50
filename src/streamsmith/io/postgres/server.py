"""A throwaway PostgreSQL server on loopback, for the demo, the CLI and the tests.

``streamsmith db start`` creates a cluster with Debian's ``initdb`` under
``<storage root>/postgres`` (data in ``data/``, log in ``postgres.log``) and starts it on
127.0.0.1 only, with password authentication for a superuser ``streamsmith``. The port,
user and generated password are kept in ``server.json`` (mode 0600) beside the data, so
later commands and pipelines find the server without anyone typing the password.

PostgreSQL refuses to run as root; when streamsmith runs as root the server binaries run
as the ``postgres`` system user, who then owns the data directory and must be able to
reach it (every parent directory must be traversable by others).
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

import psycopg
from psycopg import sql

from streamsmith.errors import UserError
from streamsmith.io.state_files import read_json_state, write_durably
from streamsmith.object_store import local_side
from streamsmith.processes import free_port, write_new_file

STATE_FILE = "server.json"
DATA_DIR = "data"
LOG_FILE = "postgres.log"
SYSTEM_USER = "postgres"
_LOG_TAIL_LINES = 15


@dataclass(frozen=True)
class PostgresServer:
    """A running embedded server: where it lives and how to reach it."""

    home: Path
    port: int
    password: str
    user: str = "streamsmith"
    database: str = "streamsmith"

    def __repr__(self) -> str:
        return f"PostgresServer(home={self.home}, port={self.port}, user={self.user})"

    @property
    def dsn(self) -> str:
        """libpq connection string of the default database (holds the password)."""
        return self.dsn_for(self.database)

    def dsn_for(self, database: str) -> str:
        """libpq connection string of another database on this server."""
        return (
            f"host=127.0.0.1 port={self.port} user={self.user} "
            f"password={self.password} dbname={database}"
        )


def embedded_home(storage_root: Path) -> Path:
    """Where ``streamsmith db start`` keeps the server of a storage root."""
    return local_side(storage_root) / "postgres"


def start_postgres(home: Path, port: int | None = None) -> PostgresServer:
    """Start the server in ``home``, creating the cluster on first use; idempotent.

    A stopped server restarts on its recorded port unless ``port`` is given.
    """
    running = postgres_status(home)
    if running is not None:
        return running
    home = home.resolve()
    state = _read_state(home)
    if state is None:
        server = _init_cluster(home, port or free_port())
    else:
        server = PostgresServer(home, port or int(state["port"]), str(state["password"]))
    _start_server(server)
    _write_state(server)
    if state is None:
        with psycopg.connect(server.dsn_for("postgres"), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(server.database)))
    return server


def stop_postgres(home: Path, mode: Literal["fast", "immediate"] = "fast") -> bool:
    """Stop the server in ``home``; True if it was running. ``immediate`` is a crash:
    no checkpoint, recovery from the WAL at the next start."""
    if postgres_status(home) is None:
        return False
    _pg_ctl(home.resolve(), "stop", "-w", "-t", "60", "-m", mode)
    return True


def postgres_status(home: Path) -> PostgresServer | None:
    """The server in ``home`` if it is running, else None."""
    home = home.resolve()
    state = _read_state(home)
    if state is None or not (home / DATA_DIR / "postmaster.pid").is_file():
        return None
    result = _run([_binary("pg_ctl"), "status", "-D", str(home / DATA_DIR)], check=False)
    if result.returncode != 0:
        return None
    return PostgresServer(home, int(state["port"]), str(state["password"]))


def restart_postgres(
    server: PostgresServer, mode: Literal["fast", "immediate"] = "immediate"
) -> None:
    """Stop (by default as a crash) and start again on the same port."""
    stop_postgres(server.home, mode)
    start_postgres(server.home, server.port)


@contextmanager
def running_postgres(home: Path, port: int | None = None) -> Iterator[PostgresServer]:
    """A server for the duration of a ``with`` block (stopped, not removed, at the end)."""
    server = start_postgres(home, port)
    try:
        yield server
    finally:
        stop_postgres(home, "immediate")


def create_database(server: PostgresServer, name: str) -> str:
    """Create (or re-create) database ``name``; returns its DSN."""
    with psycopg.connect(server.dsn_for("postgres"), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return server.dsn_for(name)


def drop_database(server: PostgresServer, name: str) -> None:
    """Drop database ``name`` if it exists, closing its connections."""
    with psycopg.connect(server.dsn_for("postgres"), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


# ---------------------------------------------------------------------------------------


def _init_cluster(home: Path, port: int) -> PostgresServer:
    server = PostgresServer(home, port, secrets.token_urlsafe(18))
    home.mkdir(parents=True, exist_ok=True)
    if _as_root():
        _check_reachable(home)
        shutil.chown(home, SYSTEM_USER, SYSTEM_USER)
    password_file = home / ".pwfile"
    password_file.unlink(missing_ok=True)  # left by an initdb cut short
    write_new_file(password_file, f"{server.password}\n".encode())  # 0600 from the start
    if _as_root():
        shutil.chown(password_file, SYSTEM_USER, SYSTEM_USER)
    try:
        _run(
            [
                _binary("initdb"),
                "-D",
                str(home / DATA_DIR),
                "-U",
                server.user,
                "--pwfile",
                str(password_file),
                "-E",
                "UTF8",
                "--locale",
                "C.UTF-8",
                "--auth-local",
                "scram-sha-256",
                "--auth-host",
                "scram-sha-256",
            ],
            check=True,
            what=f"initdb in {home / DATA_DIR}",
        )
    finally:
        password_file.unlink(missing_ok=True)
    return server


def _start_server(server: PostgresServer) -> None:
    """``pg_ctl start``, which runs the server through ``/bin/sh -c``: so no path goes on
    its command line (a storage root named ``$(...)`` would run), neither the data
    directory (``PGDATA`` instead of ``-D``) nor the log (pg_ctl's output, which the
    server inherits, is the log file instead of ``-l``), and the options are constants
    and a port, each quoted. Loopback only; the socket sits in the data directory (the
    server's working directory), not in /var/run/postgresql."""
    options = ["-p", str(server.port), "-c", "listen_addresses=127.0.0.1",
               "-c", "unix_socket_directories=."]  # fmt: skip
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    with os.fdopen(os.open(server.home / LOG_FILE, flags, 0o600), "ab") as log:
        if _as_root():
            shutil.chown(server.home / LOG_FILE, SYSTEM_USER, SYSTEM_USER)
        _run(
            [_binary("pg_ctl"), "start", "-w", "-t", "60", "-o", shlex.join(options)],
            check=True,
            what="pg_ctl start",
            home=server.home,
            env={**os.environ, "PGDATA": str(server.home / DATA_DIR)},
            stdout=log,
        )


def _pg_ctl(home: Path, *args: str) -> None:
    _run(
        [_binary("pg_ctl"), *args, "-D", str(home / DATA_DIR)],
        check=True,
        what=f"pg_ctl {args[0]}",
        home=home,
    )


def _run(
    command: list[str],
    *,
    check: bool,
    what: str = "",
    home: Path | None = None,
    env: dict[str, str] | None = None,
    stdout: IO[bytes] | None = None,
) -> subprocess.CompletedProcess[str]:
    if _as_root():
        command = ["runuser", "-u", SYSTEM_USER, "--", *command]  # keeps the environment
    result = subprocess.run(
        command,
        stdout=stdout or subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
        timeout=120,
        env=env,
    )
    if check and result.returncode != 0:
        detail = (result.stderr or result.stdout or "").strip().splitlines()[-5:]
        log = _log_tail(home) if home else ""
        raise UserError(f"PostgreSQL {what} failed: {' '.join(detail)}{log}")
    return result


def _log_tail(home: Path) -> str:
    log = home / LOG_FILE
    if not log.is_file():
        return ""
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()[-_LOG_TAIL_LINES:]
    return f"; server log {log}:\n" + "\n".join(lines)


def _binary(name: str) -> str:
    """A PostgreSQL server binary: on PATH, else Debian's newest /usr/lib/postgresql/*/bin."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(
        Path("/usr/lib/postgresql").glob(f"*/bin/{name}"),
        key=lambda path: int(path.parts[-3]) if path.parts[-3].isdigit() else 0,
    )
    if not candidates:
        raise UserError(
            f"PostgreSQL server program {name} not found: install it with "
            "`apt-get install postgresql` (make setup does) or point the spec's "
            "postgres.dsn at your own server"
        )
    return str(candidates[-1])


def _as_root() -> bool:
    return os.geteuid() == 0


def _check_reachable(home: Path) -> None:
    """As root, the postgres user must be able to walk down to ``home``."""
    for parent in reversed(home.resolve().parents):
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            raise UserError(
                f"PostgreSQL runs as user {SYSTEM_USER}, who cannot enter {parent} (mode "
                f"{stat.filemode(mode)}): choose a storage root outside it, or "
                f"`chmod o+x {parent}`"
            )


def _read_state(home: Path) -> dict[str, str | int] | None:
    file = home / STATE_FILE
    if not file.is_file():
        return None
    remedy = "stop the server (`streamsmith db stop`), remove the file and start it again"
    state: dict[str, str | int] = read_json_state(file, remedy)
    return state


def _write_state(server: PostgresServer) -> None:
    file = server.home / STATE_FILE
    state = {"port": server.port, "user": server.user, "database": server.database,
             "password": server.password}  # fmt: skip
    write_durably(file, json.dumps(state, indent=2), mode=0o600)
