"""``streamsmith jvm``: the pinned jars (``streamsmith.spark.jars``) and the
class-data-sharing archive that lets Spark's JVM start warm (``streamsmith.spark.jvm_archive``
says what it is and when it is used). Those modules and the scaffold load only when a
``jvm`` command runs: every other command starts without them."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from streamsmith.cli.common import say
from streamsmith.errors import UserError

jvm_cli = typer.Typer(
    rich_markup_mode="markdown",
    help="The pinned jars Spark and the broker run on, and the archive of Spark's classes "
    "that makes every Spark start faster.",
    no_args_is_help=True,
)


@jvm_cli.command("fetch")
def fetch(
    force: Annotated[bool, typer.Option(help="Resolve again even if installed.")] = False,
) -> None:
    """Resolve the pinned jars (Spark's Kafka and Avro connectors, Delta Lake,
    the Kafka broker) once with Maven into streamsmith's own folder; runs use only that."""
    from streamsmith.spark import jars, stack

    started = time.monotonic()
    resolved = jars.fetch(force=force)
    counts = ", ".join(f"{group} {len(found)} jars" for group, found in resolved.items())
    say(f"{stack.describe()}: {counts} in {jars.home()} ({time.monotonic() - started:.0f} s)")


@jvm_cli.command("jars")
def show_jars() -> None:
    """The version set and the jars each group puts on a classpath."""
    from streamsmith.spark import jars, stack

    say(stack.describe())
    for group in stack.GROUPS:
        for path in jars.group_jars(group):
            say(f"{group}\t{path}")


def _archive() -> Path:
    from streamsmith.spark import jvm_archive

    archive = jvm_archive.archive_path()
    if archive is None:
        raise UserError("no java found (JAVA_HOME or PATH): install Java 17 (make setup does)")
    return archive


@jvm_cli.command("build")
def build(
    force: Annotated[bool, typer.Option(help="Record a new archive even if one exists.")] = False,
) -> None:
    """Record the archive: one available-now run of the `init` project, whose JVM writes
    the classes it loaded as it exits (about a minute, once per Java and Spark version).
    Archives no JVM has mapped for 14 days (other checkouts', older versions') are
    deleted."""
    archive = _archive()
    if archive.is_file() and not force:
        say(f"up to date: {archive}")
        _remove_idle(archive)
        return
    archive.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    recorded = record_archive(archive)
    say(
        f"built {recorded} ({recorded.stat().st_size / 2**20:.0f} MiB) in "
        f"{time.monotonic() - started:.0f} s"
    )
    _remove_idle(recorded)


def _remove_idle(kept: Path) -> None:
    """Delete the archives of other checkouts or versions no JVM has mapped lately: each
    is some 200 MiB, and a machine that makes virtualenvs again and again gathers them."""
    from streamsmith.spark import jvm_archive

    idle = jvm_archive.idle_archives(kept.parent, kept, time.time())
    for path in idle:
        path.unlink()
    if idle:
        say(
            f"removed {len(idle)} archive(s) no JVM mapped in {jvm_archive.IDLE_DAYS} days "
            f"from {kept.parent}"
        )


@jvm_cli.command("status")
def status() -> None:
    """Where this machine's archive is, and whether sessions use it."""
    from streamsmith.spark import jvm_archive

    archive = _archive()
    if os.environ.get(jvm_archive.SWITCH_ENV, "").lower() in {"off", "0", "false", "no"}:
        say(f"off (${jvm_archive.SWITCH_ENV}); archive: {archive}")
    elif archive.is_file():
        say(f"in use: {archive} ({archive.stat().st_size / 2**20:.0f} MiB)")
    else:
        say(f"not built: `streamsmith jvm build` writes {archive}")
        raise typer.Exit(1)


@jvm_cli.command("remove")
def remove() -> None:
    """Delete every archive streamsmith recorded on this machine."""
    folder = _archive().parent
    removed = sorted(folder.glob("spark-*.jsa")) if folder.is_dir() else []
    for path in removed:
        path.unlink()
    say(f"removed {len(removed)} archive(s) from {folder}")


def record_archive(archive: Path) -> Path:
    """Run a small pipeline in a child process that records the classes its JVM loads,
    then move the archive into place (atomically: running JVMs keep the file they mapped)."""
    from streamsmith.scaffold import init_project
    from streamsmith.spark import jvm_archive

    staging = archive.with_name(f".{archive.name}.{os.getpid()}.tmp")
    with tempfile.TemporaryDirectory(prefix="streamsmith-jvm-") as folder:
        project = Path(folder) / "warm"
        init_project(project)
        env = {**os.environ, jvm_archive.RECORD_ENV: str(staging)}
        env.pop("STREAMSMITH_ROOT", None)
        result = subprocess.run(
            [sys.executable, "-m", "streamsmith", "run", "--trigger", "available-now"],
            cwd=project, env=env, capture_output=True, text=True, check=False, timeout=900,
        )  # fmt: skip
    if result.returncode != 0 or not staging.is_file():
        staging.unlink(missing_ok=True)
        raise UserError(
            f"recording the JVM archive failed (exit {result.returncode}); sessions start "
            f"without one:\n{result.stderr[-2000:]}"
        )
    staging.replace(archive)
    return archive
