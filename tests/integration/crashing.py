"""Helpers for crash tests: run a pipeline in its own process group and kill it mid-batch."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


def spawn(command: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    """Start ``command`` in its own process group, so a kill takes its JVM down too.

    The child inherits this environment without ``STREAMSMITH_ROOT``, plus ``env``.
    """
    env = {**{k: v for k, v in os.environ.items() if k != "STREAMSMITH_ROOT"}, **(env or {})}
    return subprocess.Popen(
        list(command), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip


def batch_ids(folder: Path) -> set[int]:
    """Batch ids logged in a checkpoint's ``offsets`` or ``commits`` folder."""
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.is_dir() else set()


def in_flight_batch(checkpoint: Path) -> int | None:
    """A batch whose offsets are logged but not yet committed, after at least one commit."""
    commits = batch_ids(checkpoint / "commits")
    pending = batch_ids(checkpoint / "offsets") - commits
    return max(pending) if commits and pending else None


def wait_until(
    process: subprocess.Popen[str], condition: Callable[[], bool], deadline_s: float
) -> bool:
    """Poll ``condition`` while ``process`` runs; False if it exits or the deadline passes."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if condition():
            return True
        try:
            process.wait(timeout=0.02)
            return condition()  # the process ended
        except subprocess.TimeoutExpired:
            continue
    return False


def kill_mid_batch(
    process: subprocess.Popen[str], checkpoint: Path, deadline_s: float = 300
) -> int:
    """SIGKILL the process group while a batch is in flight; returns that batch's id.

    The batch is read from the checkpoint as the kill left it: read before the kill, a
    batch committing in between (a busy machine's scheduling) read as in flight."""
    try:
        wait_until(process, lambda: in_flight_batch(checkpoint) is not None, deadline_s)
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate(timeout=60)
    killed_in = in_flight_batch(checkpoint)
    assert killed_in is not None, f"no batch was ever in flight; stderr:\n{stderr[-3000:]}"
    assert process.returncode == -signal.SIGKILL
    assert killed_in not in batch_ids(checkpoint / "commits")
    return killed_in


def kill_while_emitting(
    process: subprocess.Popen[str],
    checkpoint: Path,
    emitted: Callable[[], bool],
    deadline_s: float = 300,
) -> int:
    """SIGKILL a Real-time Mode query's process group as soon as ``emitted()`` says its
    running batch has emitted what the test sent it; returns that batch's id.

    Real-time Mode logs a batch's offsets only as the batch ends, just before its commit,
    so the checkpoint never shows a batch in flight (``kill_mid_batch`` waited for a
    window of milliseconds): the running batch is the one after the last committed."""
    try:
        reached = wait_until(process, emitted, deadline_s)
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate(timeout=60)
    assert reached, f"the running batch emitted nothing; stderr:\n{stderr[-3000:]}"
    assert process.returncode == -signal.SIGKILL
    committed = batch_ids(checkpoint / "commits")
    assert committed and batch_ids(checkpoint / "offsets") <= committed
    return max(committed) + 1
