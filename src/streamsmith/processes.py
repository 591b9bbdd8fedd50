"""Small helpers for the servers streamsmith starts (broker, PostgreSQL, cluster)."""

from __future__ import annotations

import os
import socket
import time


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
