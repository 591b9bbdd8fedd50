"""The embedded services under the storage root: ``db``, ``broker``, ``cluster``, ``topic``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer

from streamsmith.cli.common import PortOpt, Root, err, say, storage_root
from streamsmith.errors import UserError

db_cli = typer.Typer(
    rich_markup_mode="markdown",
    help="The embedded PostgreSQL server under the storage root.",
    no_args_is_help=True,
)
broker_cli = typer.Typer(
    rich_markup_mode="markdown",
    help="An Apache Kafka broker (one KRaft node) on 127.0.0.1 under the storage root.",
    no_args_is_help=True,
)
topic_cli = typer.Typer(rich_markup_mode="markdown", help="Kafka topics.", no_args_is_help=True)
cluster_cli = typer.Typer(
    rich_markup_mode="markdown",
    help="A Spark standalone cluster (master and workers) on 127.0.0.1, from the pyspark "
    "wheel; point spark.master at the URL it prints.",
    no_args_is_help=True,
)


def stopped(done: bool, what: str, home: Path) -> None:
    """What a ``stop`` command did: stopped the service, or found none running."""
    say("stopped" if done else f"no {what} running in {home}")


def not_running(what: str, home: Path) -> NoReturn:
    """A ``status`` command's answer when the service is down: say so and exit 1."""
    say(f"no {what} running in {home}")
    raise typer.Exit(1)


@db_cli.command("start")
def db_start(root: Root = None, port: PortOpt = None) -> None:
    """Start (creating on first use) a PostgreSQL server on 127.0.0.1 for postgres sinks."""
    from streamsmith.io.postgres.dsn import mask_dsn
    from streamsmith.io.postgres.server import STATE_FILE, embedded_home, start_postgres

    home = embedded_home(storage_root(root))
    server = start_postgres(home, port)
    say(f"PostgreSQL running on 127.0.0.1:{server.port}: {mask_dsn(server.dsn)}")
    say(f"(password in {home / STATE_FILE}; pipelines on this storage root use it by default)")


@db_cli.command("stop")
def db_stop(root: Root = None) -> None:
    """Stop the embedded PostgreSQL server (its data stays for the next start)."""
    from streamsmith.io.postgres.server import embedded_home, stop_postgres

    home = embedded_home(storage_root(root))
    stopped(stop_postgres(home), "PostgreSQL server", home)


@db_cli.command("status")
def db_status(root: Root = None) -> None:
    """Say whether the embedded PostgreSQL server runs, and where; exit 1 if not."""
    from streamsmith.io.postgres.dsn import mask_dsn
    from streamsmith.io.postgres.server import embedded_home, postgres_status

    home = embedded_home(storage_root(root))
    server = postgres_status(home)
    if server is None:
        not_running("PostgreSQL server", home)
    say(f"running on 127.0.0.1:{server.port}: {mask_dsn(server.dsn)}")


@broker_cli.command("start")
def broker_start(root: Root = None, port: PortOpt = None) -> None:
    """Start Apache Kafka on 127.0.0.1 that keeps running after this command; its topics,
    log and pid live under `<root>/broker` and outlive a stop. It admits SASL/PLAIN
    logins only: streamsmith's own clients log in as `streamsmith` with the secret in the
    0600 file the start-up line names."""
    from streamsmith.io.kafka.broker import broker_home, start_broker_daemon
    from streamsmith.spark.auth import BROKER, secret_path

    home = broker_home(storage_root(root))
    with err.status("starting Apache Kafka"):
        started = start_broker_daemon(home, port)
    secret = secret_path(BROKER, f"127.0.0.1:{started}")
    say(f"broker running on 127.0.0.1:{started} (SASL/PLAIN, user streamsmith, secret in "
        f"{secret}; data, log and pid in {home})")  # fmt: skip


@broker_cli.command("stop")
def broker_stop(root: Root = None) -> None:
    """Stop the broker (its topics stay on disk for the next start)."""
    from streamsmith.io.kafka.broker import broker_home, stop_broker_daemon

    home = broker_home(storage_root(root))
    stopped(stop_broker_daemon(home), "broker", home)


@broker_cli.command("status")
def broker_status(root: Root = None) -> None:
    """Say whether the embedded broker runs and on which port; exit 1 if not."""
    from streamsmith.io.kafka.broker import broker_daemon_port, broker_home

    home = broker_home(storage_root(root))
    port = broker_daemon_port(home)
    if port is None:
        not_running("broker", home)
    say(f"broker running on 127.0.0.1:{port}")


@cluster_cli.command("start")
def cluster_start(
    root: Root = None,
    workers: Annotated[int, typer.Option("--workers", min=1)] = 2,
    cores: Annotated[int, typer.Option("--cores", help="Cores per worker.", min=1)] = 1,
    memory: Annotated[str, typer.Option("--memory", help="Memory per worker.")] = "2g",
) -> None:
    """Start a master and workers that keep running after this command (pids, logs and
    work directories under `<root>/cluster`); prints the master URL."""
    from streamsmith.spark.cluster import cluster_home, start_cluster

    home = cluster_home(storage_root(root))
    with err.status(f"starting a Spark master and {workers} workers"):
        started = start_cluster(home, workers, cores=cores, memory=memory)
    say(started.master_url)
    say(f"master web UI {started.master.web_ui}, {len(started.workers)} workers; logs and "
        f"pids in {home}; run an app on it with --set spark.master={started.master_url}",
        to_stderr=True)  # fmt: skip


@cluster_cli.command("stop")
def cluster_stop(root: Root = None) -> None:
    """Stop the workers (and their executors) and the master; logs stay."""
    from streamsmith.spark.cluster import cluster_home, stop_cluster

    home = cluster_home(storage_root(root))
    stopped(stop_cluster(home), "cluster", home)


@cluster_cli.command("status")
def cluster_status(root: Root = None) -> None:
    """Say whether the cluster runs, its master URL and live workers; exit 1 if not."""
    from streamsmith.spark.cluster import cluster_home
    from streamsmith.spark.cluster import cluster_status as running_cluster

    home = cluster_home(storage_root(root))
    cluster = running_cluster(home)
    if cluster is None:
        not_running("cluster", home)
    state = cluster.state()
    alive = sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")
    apps = len(state.get("activeapps", []))
    say(f"{cluster.master_url}: {alive} of {len(cluster.workers)} workers alive, {apps} "
        f"running apps; web UI {cluster.master.web_ui}")  # fmt: skip


Bootstrap = Annotated[
    str | None,
    typer.Option("--bootstrap", help="Kafka servers (default: the embedded broker)."),
]


def servers(bootstrap: str | None, root: str | None) -> str:
    """The Kafka servers given, else the embedded broker's under the storage root."""
    from streamsmith.io.kafka.broker import broker_daemon_port, broker_home

    if bootstrap is not None:
        return bootstrap
    port = broker_daemon_port(broker_home(storage_root(root)))
    if port is None:
        raise UserError("no embedded broker running: `streamsmith broker start` or --bootstrap")
    return f"127.0.0.1:{port}"


@topic_cli.command("create")
def topic_create(
    name: str,
    partitions: Annotated[int, typer.Option("--partitions", min=1)] = 1,
    bootstrap: Bootstrap = None,
    root: Root = None,
) -> None:
    """Create a topic (an existing one is left as it is)."""
    from streamsmith.generate.deliver import Topic

    bootstrap = servers(bootstrap, root)
    created = Topic(bootstrap, name, partitions).create()
    say(f"{'created' if created else 'exists:'} topic {name} on {bootstrap}")


@topic_cli.command("produce")
def topic_produce(
    name: str,
    files: Annotated[list[Path], typer.Argument(help="Files whose lines become records.")],
    bootstrap: Bootstrap = None,
    root: Root = None,
) -> None:
    """Produce each non-empty line of the files as one record (no key), waiting for every
    acknowledgement; the topic is created first if it does not exist."""
    from streamsmith.generate import produce_all
    from streamsmith.generate.deliver import Topic

    bootstrap = servers(bootstrap, root)
    lines = []
    for path in files:
        if not path.is_file():
            raise UserError(f"no file {path} to produce")
        lines += [line for line in path.read_bytes().splitlines() if line.strip()]
    Topic(bootstrap, name, 1).create()
    produced = produce_all(bootstrap, name, lines, [None] * len(lines))
    say(f"produced {produced} records to topic {name} on {bootstrap}")
