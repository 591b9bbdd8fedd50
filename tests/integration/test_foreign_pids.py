"""``cluster stop`` and ``broker stop`` signal a pid read from their JSON state only while
it still runs their own daemon's command line: a reused or planted pid is left alone."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamsmith.io.kafka.broker import BROKER_STATE, stop_broker_daemon
from streamsmith.processes import alive, runs_command
from streamsmith.spark.cluster import (
    STATE_FILE,
    cluster_status,
    daemon_mark,
    stop_cluster,
)

SLEEPER = "import time; print('up', flush=True); time.sleep(600)"


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """Somebody else's process, in its own group as the daemons are."""
    process = subprocess.Popen(
        [sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE, start_new_session=True
    )
    assert process.stdout is not None
    process.stdout.readline()  # running its own command line now
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def test_a_pid_runs_a_command_only_with_the_mark_among_its_arguments(
    bystander: subprocess.Popen[bytes],
) -> None:
    assert runs_command(bystander.pid, "time.sleep") is False  # part of an argument only
    assert runs_command(bystander.pid, SLEEPER) is True
    assert runs_command(2**22 + 1, "anything") is False  # no such process


def test_cluster_stop_leaves_a_pid_that_is_not_its_daemon_alone(
    tmp_path: Path, bystander: subprocess.Popen[bytes]
) -> None:
    home = tmp_path / "cluster"
    home.mkdir()
    daemon = {"pid": bystander.pid, "log": str(home / "master.log"), "web_ui": "http://x:1"}
    state = {"master_url": "spark://127.0.0.1:1", "master": daemon, "workers": [daemon]}
    (home / STATE_FILE).write_text(json.dumps(state), encoding="utf-8")

    assert cluster_status(home) is None
    assert stop_cluster(home, timeout_s=1.0) is False
    assert alive(bystander.pid)
    assert not (home / STATE_FILE).exists()  # the stale record is dropped
    assert daemon_mark(home.resolve()).startswith("-Dstreamsmith.cluster=")


def test_broker_stop_leaves_a_pid_that_is_not_its_broker_alone(
    tmp_path: Path, bystander: subprocess.Popen[bytes]
) -> None:
    (tmp_path / BROKER_STATE).write_text(json.dumps({"pid": bystander.pid, "port": 1}))

    assert stop_broker_daemon(tmp_path, timeout_s=1.0) is False
    assert alive(bystander.pid)
