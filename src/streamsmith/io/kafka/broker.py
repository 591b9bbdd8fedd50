"""Apache Kafka, started by streamsmith: one KRaft node (broker and controller) on loopback.

It runs on the ``kafka`` jars ``make setup`` resolved (``streamsmith.spark.jars``), in a
JVM of its own, with its logs and data under a folder of the caller's: the demo's, a
test's, or ``<storage root>/broker`` for ``streamsmith broker start``. Its topics live on
disk in ``<home>/data``, so a broker stopped (or killed) and started again on the same
folder keeps every record, offset and committed transaction, as a Kafka node does.
The storage is formatted on first use with a new cluster id; ``home`` must be private to
one broker at a time.

Settings are those of a single-node development cluster: replication factor 1 for the
internal topics, few partitions for them (a fast first consumer group), and no delay
before the first rebalance.

It authenticates by default: its one listener, and its controller's, take SASL/PLAIN
only, for the user ``streamsmith`` with a secret in a 0600 file that streamsmith's own
clients find by the broker's address (``streamsmith.io.kafka.login``), and for the
``sasl_users`` given. No plain listener stays open beside it: any local user could
otherwise create topics and produce records. ``auth=False`` (the test suite's shared
broker) listens PLAINTEXT, as a broker of a developer's own would.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from streamsmith.io.kafka.login import (
    MECHANISM,
    PROTOCOL,
    USER,
    forget_server_secret,
    jaas_config,
    librdkafka_login,
    server_secret,
)
from streamsmith.object_store import local_side
from streamsmith.processes import alive, answers, free_port, runs_command
from streamsmith.spark import jars, jvm_archive

MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
PROPERTIES = "server.properties"
HEAP = "-Xmx768m"

_LOG4J = """status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = OUT
logger.kafka.name = kafka.server.KafkaRaftServer
logger.kafka.level = INFO
"""


class BrokerError(RuntimeError):
    """The broker could not be started; the message says why and where its log is."""


@dataclass
class EmbeddedBroker:
    """A running Kafka node; stop it with :meth:`stop` (or use it as a context manager)."""

    process: subprocess.Popen[bytes]
    port: int
    home: Path
    sasl_port: int | None = None  # its SASL_PLAINTEXT (PLAIN) listener's: ``port`` or None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        """The SASL/PLAIN listener's address (the broker's own, unless ``auth=False``)."""
        if self.sasl_port is None:
            raise BrokerError("this broker was started without authentication (auth=False)")
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def log_path(self) -> Path:
        return self.home / "broker.log"

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        timeout_s: float = 30.0,
        config: Mapping[str, str] | None = None,
    ) -> None:
        """Create a topic (``config``: topic settings such as ``cleanup.policy``) and wait
        until it is usable; an existing topic is an error."""
        admin = AdminClient(librdkafka_login({"bootstrap.servers": self.bootstrap}))
        topic = NewTopic(name, num_partitions=partitions, config=dict(config or {}))
        try:
            admin.create_topics([topic])[name].result(timeout=timeout_s)
        except KafkaException as exc:
            raise BrokerError(f"cannot create topic {name!r} on {self.bootstrap}: {exc}") from None

    def stop(self) -> None:
        """End the node (SIGTERM: a clean shutdown; SIGKILL after 20 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def kill(self) -> None:
        """End the node at once (SIGKILL), as a crash would."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def __enter__(self) -> EmbeddedBroker:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def start_broker(
    home: Path,
    port: int | None = None,
    timeout_s: float = 60.0,
    *,
    detach: bool = False,
    sasl_users: Mapping[str, str] | None = None,
    auth: bool = True,
) -> EmbeddedBroker:
    """Start a Kafka node on ``127.0.0.1:port`` (a free port by default) with its data in
    ``home`` and wait until it answers.

    A ``home`` that held a broker before keeps its topics; on it, ``port=None`` takes the
    port it had. ``detach`` starts it in its own session, so it outlives the command that
    started it (``streamsmith broker start``). Its listener takes SASL/PLAIN only
    (SASL_PLAINTEXT), for streamsmith's own clients and the ``sasl_users`` (name:
    password) given; ``auth=False`` without users listens PLAINTEXT instead.
    """
    home.mkdir(parents=True, exist_ok=True)
    port = port or _previous_port(home) or free_port()
    controller = free_port()
    address = f"127.0.0.1:{port}"
    users = dict(sasl_users or {})
    if auth:
        users[USER] = server_secret(address)
    else:
        forget_server_secret(address)  # our clients must not log in to a plain listener
    sasl_port = port if users else None
    properties = home / PROPERTIES
    settings = _server_properties(home, port, controller, users)
    properties.unlink(missing_ok=True)  # it may hold passwords: never readable by others
    descriptor = os.open(properties, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(settings)
    (home / "log4j2.properties").write_text(_LOG4J, encoding="utf-8")
    if not (home / "data" / "meta.properties").is_file():
        _format_storage(home, properties)
    command = [*_java(home), MAIN_CLASS, str(properties)]
    log_path = home / "broker.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=detach
        )
    broker = EmbeddedBroker(process, port, home, sasl_port)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BrokerError(f"Kafka exited with {process.returncode}; see {log_path}")
        # The port first: librdkafka would log every refused connection to stderr.
        if answers(port):
            try:
                AdminClient(_admin_conf(broker, users)).list_topics(timeout=2)
            except KafkaException:
                continue
            return broker
        time.sleep(0.1)
    broker.stop()
    raise BrokerError(f"Kafka did not answer on {broker.bootstrap} within {timeout_s:.0f}s")


def _java(home: Path) -> list[str]:
    java = jvm_archive.java_binary()
    if java is None:
        raise BrokerError("no java found (JAVA_HOME or PATH): install Java 17 (make setup does)")
    classpath = ":".join(str(path) for path in jars.group_jars("kafka"))
    return [
        str(java), HEAP, "-XX:+UseG1GC", "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={home / 'log4j2.properties'}",
        f"-Dkafka.logs.dir={home}", "-cp", classpath,
    ]  # fmt: skip


def _format_storage(home: Path, properties: Path) -> None:
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    # One id in 64 starts with "-", which the tool's parser would take for an option:
    # give it as the option's value, attached.
    command = [*_java(home), STORAGE_TOOL, "format", f"--cluster-id={cluster_id}", "-c",
               str(properties)]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise BrokerError(
            f"formatting Kafka's storage in {home / 'data'} failed:\n"
            f"{(result.stdout + result.stderr)[-2000:]}"
        )


def _admin_conf(broker: EmbeddedBroker, users: Mapping[str, str]) -> dict[str, Any]:
    """How the start checks that the broker answers: as streamsmith's clients log in, or
    as the one SASL user given (``auth=False`` with ``sasl_users``)."""
    conf = librdkafka_login({"bootstrap.servers": broker.bootstrap})
    if users and "security.protocol" not in conf:
        name, secret = next(iter(users.items()))
        conf |= {"security.protocol": PROTOCOL, "sasl.mechanism": MECHANISM,
                 "sasl.username": name, "sasl.password": secret}  # fmt: skip
    return conf


def _server_properties(home: Path, port: int, controller: int, users: Mapping[str, str]) -> str:
    """A single node's settings: PLAINTEXT without ``users``; with them, SASL/PLAIN on
    the listener and the controller's, and no plain listener at all."""
    protocol = PROTOCOL if users else "PLAINTEXT"
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller}",
        "listeners": f"{protocol}://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"{protocol}://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": protocol,
        "listener.security.protocol.map": f"CONTROLLER:{protocol},{protocol}:{protocol}",
        "log.dirs": str(home / "data"),
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "3",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # The log cleaner compacts topics with cleanup.policy=compact soon after writes.
        "log.cleaner.backoff.ms": "1000",
    }
    if users:
        # The node logs in to itself (broker to controller, broker to broker) as the
        # first user: streamsmith's own, unless auth=False.
        name, secret = list(users.items())[-1]
        accounts = " ".join(f'user_{user}="{password}"' for user, password in users.items())
        jaas = jaas_config(name, secret).rstrip(";") + f" {accounts};"
        settings |= {
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            "sasl.mechanism.controller.protocol": MECHANISM,
            "listener.name.controller.sasl.enabled.mechanisms": MECHANISM,
            f"listener.name.{PROTOCOL.lower()}.plain.sasl.jaas.config": jaas,
            "listener.name.controller.plain.sasl.jaas.config": jaas,
        }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def _previous_port(home: Path) -> int | None:
    properties = home / PROPERTIES
    if not properties.is_file():
        return None
    for line in properties.read_text(encoding="utf-8").splitlines():
        if line.startswith("advertised.listeners="):
            plain = line.split("=", 1)[1].split(",")[
                0
            ]  # PLAINTEXT:// or SASL_PLAINTEXT://127.0.0.1:PORT
            return int(plain.rsplit(":", 1)[1])
    return None


# ---------------------------------------------------------------------------------------
# A broker that outlives the command: `streamsmith broker start | stop | status`

BROKER_STATE = "broker.json"


def broker_home(storage_root: Path) -> Path:
    """Where ``streamsmith broker start`` keeps the broker's data, pid, port and log."""
    return local_side(storage_root) / "broker"


def start_broker_daemon(home: Path, port: int | None = None) -> int:
    """Start a detached broker recorded in ``home``; idempotent. Returns its port."""
    running = broker_daemon_port(home)
    if running is not None:
        return running
    broker = start_broker(home, port, detach=True)
    state = {"pid": broker.process.pid, "port": broker.port, "log": str(broker.log_path)}
    staging = home / f".{BROKER_STATE}.tmp"
    staging.write_text(json.dumps(state), encoding="utf-8")
    staging.replace(home / BROKER_STATE)
    return broker.port


def broker_daemon_port(home: Path) -> int | None:
    """The port of the broker recorded in ``home`` if it is running and answers, else None."""
    pid = _our_pid(home)
    if pid is None:
        return None
    port = int(_daemon_state(home)["port"])  # type: ignore[index]
    try:
        AdminClient(librdkafka_login({"bootstrap.servers": f"127.0.0.1:{port}"})).list_topics(
            timeout=5
        )
    except KafkaException:
        return None
    return port


def stop_broker_daemon(home: Path, timeout_s: float = 30.0) -> bool:
    """Stop the broker recorded in ``home``; True if one was running. Its topics stay on
    disk for the next start."""
    pid = _our_pid(home)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)
    (home / BROKER_STATE).unlink(missing_ok=True)
    return True


def _our_pid(home: Path) -> int | None:
    """The recorded pid if that process is still this broker (its command line names this
    home's properties): a pid reused by another process is never signalled."""
    state = _daemon_state(home)
    if state is None:
        return None
    pid = int(state["pid"])
    return pid if runs_command(pid, str(home / PROPERTIES)) else None


def _daemon_state(home: Path) -> dict[str, int | str] | None:
    file = home / BROKER_STATE
    if not file.is_file():
        return None
    try:
        state: dict[str, int | str] = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return None  # torn by a crash mid-write: no broker we can vouch for
    return state
