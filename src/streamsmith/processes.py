"""Small helpers for the servers streamsmith starts (broker, PostgreSQL, cluster) and the
files it keeps for itself: which process is ours, free ports, folders and files no other
local user can read or plant."""

from __future__ import annotations

import os
import socket
import stat
import time
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs; reaps it first if it is our own finished child, so a
    daemon that exited is not kept alive as a zombie by the check itself."""
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child
        finished = 0
    if finished:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def runs_command(pid: int, marker: str) -> bool:
    """Whether ``pid`` runs and one argument of its command line is ``marker`` (a path or
    flag only our own daemon has): a recorded pid since reused by another process, or a
    pid planted in a state file, is never signalled."""
    if not alive(pid):
        return False
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return marker.encode() in command


def private_dir(path: Path) -> Path:
    """``path`` as a folder only this user can enter: created 0700 if missing; refused
    (PermissionError naming the fix) if it is a symlink, belongs to another user or is
    open to others, since anything in it (a zip shipped to executors, cached Kafka
    records) is trusted as our own."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise PermissionError(f"{path} is not a folder (a symlink?): remove it and retry")
    if info.st_uid != os.geteuid():
        raise PermissionError(
            f"{path} belongs to user id {info.st_uid}, not to this user ({os.geteuid()}): "
            "another user may have planted files there; remove it or choose another folder"
        )
    if info.st_mode & 0o077:
        raise PermissionError(
            f"{path} is open to other users (mode {stat.filemode(info.st_mode)}): "
            f"`chmod 700 {path}` once you trust its content, or remove it"
        )
    return path


def write_new_file(path: Path, data: bytes, mode: int = PRIVATE_FILE_MODE) -> None:
    """Create ``path`` with ``data``, readable by this user only from the first byte:
    fails if anything (a file, a planted symlink) already has the name."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with os.fdopen(os.open(path, flags, mode), "wb") as file:
        file.write(data)


def read_own_file(path: Path) -> bytes:
    """The bytes of ``path``, never through a symlink (OSError if it is one)."""
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as file:
        return file.read()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (servers listen on loopback only)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers(port: int) -> bool:
    """Whether something accepts TCP connections on ``127.0.0.1:port``."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def wait_for_port(port: int, timeout_s: float) -> None:
    """Wait until ``127.0.0.1:port`` accepts connections; TimeoutError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not answers(port):
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing answered on 127.0.0.1:{port} within {timeout_s:.0f}s")
        time.sleep(0.05)
