"""Small helpers for the servers streamsmith starts (broker, PostgreSQL, cluster)."""

from __future__ import annotations

import os
import socket


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


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (servers listen on loopback only)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
