"""A Spark standalone cluster on loopback, started from the pyspark wheel.

``streamsmith cluster start`` runs a master and N workers (``spark-class
org.apache.spark.deploy.master.Master`` / ``...worker.Worker`` from the wheel's
``bin/``), so the same app runs unchanged on a real cluster by setting ``spark.master``
to the URL it prints: executors are separate JVMs with their own Python workers, reading
Kafka partitions and keeping state in parallel. Everything listens on 127.0.0.1 on free
ports; pids, ports and logs live under ``<storage root>/cluster`` (``cluster.json``,
``master.log``, ``worker-N.log``) and executors' work directories (their stdout and
stderr per application) under ``<storage root>/cluster/work/worker-N``.

The daemons run in their own process groups, so they outlive the command that started
them, and stopping a group also ends the executors and Python workers it spawned. Each
daemon's command line carries a mark of its home (``-Dstreamsmith.cluster=<digest>``):
``cluster stop`` signals a recorded pid only while it still runs with that mark, never a
pid since reused by another process or planted in ``cluster.json``.

Nobody else on the machine may use the cluster: ``cluster start`` generates a secret and
turns on Spark's shared-secret authentication (``spark.authenticate``) for the master,
the workers and every driver streamsmith starts against that master URL. The secret
lives in a properties file readable by this user only, in a per-user folder under the
cache (``streamsmith.spark.auth``), handed to the JVMs with ``--properties-file`` so it
never appears on a command line, where any local user could read it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib import util
from pathlib import Path
from typing import Any

from streamsmith.errors import UserError
from streamsmith.object_store import local_side
from streamsmith.processes import alive, free_port, runs_command
from streamsmith.spark import auth

STATE_FILE = "cluster.json"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
LOOPBACK = "127.0.0.1"
_LOG_TAIL_LINES = 12
_AUTH_PROPERTIES = (
    "spark.authenticate=true\nspark.authenticate.secret={secret}\nspark.ui.killEnabled=false\n"
)


class ClusterError(UserError):
    """The standalone cluster could not be started; the message names the log to read."""


@dataclass(frozen=True)
class Daemon:
    """One master or worker JVM: its process (group) id, log file and web UI."""

    pid: int
    log: Path
    web_ui: str


@dataclass(frozen=True)
class StandaloneCluster:
    """A running master and its workers, as recorded in ``<home>/cluster.json``."""

    home: Path
    master_url: str
    master: Daemon
    workers: tuple[Daemon, ...]

    def state(self, timeout_s: float = 5.0) -> dict[str, Any]:
        """The master's ``/json/`` view: workers (id, host, cores, state), active and
        completed applications."""
        return master_json(self.master.web_ui, timeout_s)


def cluster_home(storage_root: Path) -> Path:
    """Where ``streamsmith cluster start`` keeps pids, ports, logs and work directories."""
    return local_side(storage_root) / "cluster"


def spark_home() -> Path:
    """The Spark distribution inside the installed pyspark wheel (has ``bin/`` and ``jars/``)."""
    spec = util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ClusterError("pyspark is not installed: `pip install pyspark`")
    home = Path(spec.origin).parent
    if not (home / "bin" / "spark-class").is_file():
        raise ClusterError(f"{home} has no bin/spark-class: reinstall the pyspark wheel")
    return home


def start_cluster(
    home: Path,
    workers: int = 2,
    *,
    cores: int = 1,
    memory: str = "2g",
    timeout_s: float = 120.0,
) -> StandaloneCluster:
    """Start a master and ``workers`` workers (``cores`` cores, ``memory`` each) on
    127.0.0.1 and wait until all workers registered with the master; idempotent.

    A cluster that does not come up within ``timeout_s`` is stopped again, and the error
    names the log to read.
    """
    if workers < 1:
        raise ClusterError(f"a cluster needs at least one worker, not {workers}")
    if not re.fullmatch(r"\d+[mMgGtT]", memory):
        raise ClusterError(f"worker memory {memory!r}: write a size such as 2g or 1536m")
    running = cluster_status(home)
    if running is not None:
        return running
    home = home.resolve()
    home.mkdir(parents=True, exist_ok=True)
    spark = spark_home()
    env = _daemon_env(spark, home)
    master_port, master_ui = free_port(), free_port()
    master_url = f"spark://{LOOPBACK}:{master_port}"
    # The master UI's kill links are off too: another user could otherwise end our apps.
    properties, _ = auth.new_secret(auth.CLUSTER, master_url, _AUTH_PROPERTIES)
    master_args = [
        "--host", LOOPBACK, "--port", str(master_port), "--webui-port", str(master_ui),
        "--properties-file", str(properties),
    ]  # fmt: skip
    master = _launch(spark, MASTER_CLASS, master_args, home / "master.log", env)
    master_daemon = Daemon(master.pid, home / "master.log", f"http://{LOOPBACK}:{master_ui}")
    started = [master]
    worker_daemons: list[Daemon] = []
    try:
        deadline = time.monotonic() + timeout_s
        _wait_for(master, master_daemon, master_daemon, deadline)
        for number in range(1, workers + 1):
            work_dir = home / "work" / f"worker-{number}"
            work_dir.mkdir(parents=True, exist_ok=True)
            ui = free_port()
            log = home / f"worker-{number}.log"
            args = [
                "--host", LOOPBACK, "--webui-port", str(ui), "--cores", str(cores),
                "--memory", memory, "--work-dir", str(work_dir),
                "--properties-file", str(properties), master_url,
            ]  # fmt: skip
            worker_env = {
                **env,
                "SPARK_WORKER_DIR": str(work_dir),
                # executors' scratch space (shuffle, spilled blocks, fetched files)
                "SPARK_LOCAL_DIRS": str(home / "local" / f"worker-{number}"),
            }
            worker = _launch(spark, WORKER_CLASS, args, log, worker_env)
            started.append(worker)
            worker_daemons.append(Daemon(worker.pid, log, f"http://{LOOPBACK}:{ui}"))
        for worker, daemon in zip(started[1:], worker_daemons, strict=True):
            _wait_for(worker, daemon, master_daemon, deadline)
    except BaseException:
        for process in reversed(started):
            _stop_group(process.pid, 10.0)
        auth.forget_secret(auth.CLUSTER, master_url)
        raise
    cluster = StandaloneCluster(home, master_url, master_daemon, tuple(worker_daemons))
    _write_state(cluster)
    return cluster


def cluster_status(home: Path) -> StandaloneCluster | None:
    """The cluster recorded in ``home`` if its master runs and answers, else None."""
    cluster = _read_state(home)
    if cluster is None or not runs_command(cluster.master.pid, daemon_mark(cluster.home)):
        return None
    try:
        cluster.state()
    except OSError:
        return None
    return cluster


def stop_cluster(home: Path, timeout_s: float = 15.0) -> bool:
    """Stop the workers (with their executors) and the master recorded in ``home``; True
    if any of them was running. Logs and work directories stay for inspection."""
    cluster = _read_state(home)
    if cluster is None:
        return False
    recorded = [worker.pid for worker in cluster.workers] + [cluster.master.pid]
    ours = [pid for pid in recorded if runs_command(pid, daemon_mark(cluster.home))]
    for pid in ours:
        _stop_group(pid, timeout_s)
    (home / STATE_FILE).unlink(missing_ok=True)
    auth.forget_secret(auth.CLUSTER, cluster.master_url)
    return bool(ours)


def auth_properties(master_url: str) -> Path | None:
    """The properties file with the secret of the cluster streamsmith started at
    ``master_url``, or None for any other master: a driver passes it to
    ``spark-submit --properties-file`` to be let in."""
    if not master_url.startswith("spark://"):
        return None
    return auth.existing_secret(auth.CLUSTER, master_url)


def daemon_mark(home: Path) -> str:
    """The JVM option that marks a daemon of the cluster in ``home`` (resolved): a digest,
    so no path with spaces or quotes goes through Spark's launcher's option parsing."""
    digest = hashlib.sha256(str(home).encode()).hexdigest()[:16]
    return f"-Dstreamsmith.cluster={digest}"


def master_json(web_ui: str, timeout_s: float = 5.0) -> dict[str, Any]:
    """GET ``<web_ui>/json/`` of a master or worker; OSError if it does not answer."""
    with urllib.request.urlopen(f"{web_ui}/json/", timeout=timeout_s) as response:
        state: dict[str, Any] = json.loads(response.read())
    return state


# ---------------------------------------------------------------------------------------
# internals


def _daemon_env(spark: Path, home: Path) -> dict[str, str]:
    """Loopback only, the wheel as SPARK_HOME, this Python for executors' workers (the
    driver's ``PYSPARK_PYTHON`` decides for PySpark tasks; this is the fallback), and the
    mark of ``home`` on every daemon's command line."""
    env = dict(os.environ)
    env.update(
        {
            "SPARK_HOME": str(spark),
            "SPARK_LOCAL_IP": LOOPBACK,
            "SPARK_LOCAL_HOSTNAME": LOOPBACK,
            "PYSPARK_PYTHON": sys.executable,
            # Master and worker are bookkeepers; executors get their own heap.
            "SPARK_DAEMON_MEMORY": env.get("SPARK_DAEMON_MEMORY", "512m"),
            "SPARK_DAEMON_JAVA_OPTS": " ".join(
                filter(None, [env.get("SPARK_DAEMON_JAVA_OPTS"), daemon_mark(home)])
            ),
            # Spark 4 opens the master's REST submission server on the fixed port 6066 by
            # default: unauthenticated, and a clash between two clusters on one machine.
            "SPARK_MASTER_OPTS": " ".join(
                filter(None, [env.get("SPARK_MASTER_OPTS"), "-Dspark.master.rest.enabled=false"])
            ),
        }
    )
    return env


def _launch(
    spark: Path, main_class: str, args: list[str], log: Path, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    """Start ``spark-class main_class args`` in its own session (``spark-class`` execs the
    JVM, so the pid is the JVM's and also its process group id)."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(spark / "bin" / "spark-class"), main_class, *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _wait_for(
    process: subprocess.Popen[bytes], daemon: Daemon, master: Daemon, deadline: float
) -> None:
    """Poll the master's ``/json/`` until it answers and, for a worker, lists it as alive;
    fail naming ``daemon``'s log if its process exits or the deadline passes."""
    what = "the master" if daemon == master else f"the worker with web UI {daemon.web_ui}"
    while True:
        if process.poll() is not None:
            raise ClusterError(
                f"{what} exited with code {process.returncode} while starting; see "
                f"{daemon.log}:\n{_tail(daemon.log)}"
            )
        try:
            state = master_json(master.web_ui, timeout_s=2.0)
        except (OSError, ValueError):
            state = None  # not listening yet, or half a page: poll again
        if state is not None and (
            daemon == master
            or any(
                worker.get("webuiaddress") == daemon.web_ui and worker.get("state") == "ALIVE"
                for worker in state.get("workers", [])
            )
        ):
            return
        if time.monotonic() > deadline:
            raise ClusterError(
                f"{what} did not come up in time (pid {process.pid}); see {daemon.log}:\n"
                f"{_tail(daemon.log)}"
            )
        time.sleep(0.25)


def _tail(log: Path) -> str:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return "  (no log written)"
    return "\n".join(f"  {line}" for line in lines[-_LOG_TAIL_LINES:])


def _stop_group(pid: int, timeout_s: float) -> None:
    """SIGTERM the process group led by ``pid`` (a daemon with its executors and their
    Python workers), then SIGKILL whatever is left after ``timeout_s``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not _group_alive(pid):
                alive(pid)  # reap the leader if it is our child
                return
            time.sleep(0.1)


def _group_alive(pgid: int) -> bool:
    alive(pgid)  # reap the leader if it is our child, so it stops counting
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _write_state(cluster: StandaloneCluster) -> None:
    def daemon(d: Daemon) -> dict[str, Any]:
        return {"pid": d.pid, "log": str(d.log), "web_ui": d.web_ui}

    state = {
        "master_url": cluster.master_url,
        "master": daemon(cluster.master),
        "workers": [daemon(w) for w in cluster.workers],
    }
    staging = cluster.home / f".{STATE_FILE}.tmp"
    staging.write_text(json.dumps(state, indent=2), encoding="utf-8")
    staging.replace(cluster.home / STATE_FILE)


def _read_state(home: Path) -> StandaloneCluster | None:
    file = home / STATE_FILE
    if not file.is_file():
        return None
    state = json.loads(file.read_text(encoding="utf-8"))

    def daemon(d: dict[str, Any]) -> Daemon:
        return Daemon(int(d["pid"]), Path(d["log"]), str(d["web_ui"]))

    return StandaloneCluster(
        home.resolve(),
        str(state["master_url"]),
        daemon(state["master"]),
        tuple(daemon(w) for w in state["workers"]),
    )
