"""Secrets that let only this user into the Spark servers streamsmith starts on loopback.

Loopback keeps other machines out, not other users of this machine. The standalone
cluster (``cluster start``), the JDBC server (``run --sql-port``, ``sql-server``) and the
Kafka broker (``broker start``: ``streamsmith.io.kafka.login``) each get a secret when
they start, written to a file only this user can read, under a
folder only this user can enter: ``<cache>/secrets/<kind>/<host>-<port>``. A client of the
same user finds it by the server's address; the secret never goes on a command line,
which every local user can read in ``/proc``.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path

from streamsmith.processes import private_dir, read_own_file, write_new_file
from streamsmith.spark.jars import cache_dir

CLUSTER = "cluster"
SQL_SERVER = "sql-server"
BROKER = "broker"  # the Kafka broker streamsmith starts (``streamsmith.io.kafka.login``)
DRIVER = "driver"  # the secrets of a spec's spark.conf, for one driver JVM's start


def secret_path(kind: str, address: str) -> Path:
    """Where the secret of the ``kind`` server at ``address`` (``host:port``, or a URL
    such as ``spark://host:port``) lives."""
    name = re.sub(r"[^0-9A-Za-z.]+", "-", address.split("://", 1)[-1]).strip("-")
    return private_dir(cache_dir() / "secrets" / kind) / name


def new_secret(kind: str, address: str, render: str = "{secret}") -> tuple[Path, str]:
    """A fresh secret for the server about to start at ``address``, written (``render``
    formatted with it) 0600 from the first byte; returns the file and the secret."""
    path = secret_path(kind, address)
    path.unlink(missing_ok=True)  # a server that died on this port left it: ours to replace
    secret = secrets.token_hex(32)
    write_new_file(path, render.format(secret=secret).encode())
    return path, secret


def existing_secret(kind: str, address: str) -> Path | None:
    """The secret file of the ``kind`` server at ``address`` if one of ours runs there."""
    path = secret_path(kind, address)
    try:
        read_own_file(path)  # never through a symlink
    except FileNotFoundError:
        return None
    return path


def forget_secret(kind: str, address: str) -> None:
    """Remove the secret of a server that stopped."""
    secret_path(kind, address).unlink(missing_ok=True)


def driver_properties(conf: Mapping[str, str]) -> Path:
    """A fresh properties file (0600 from the first byte) holding ``conf``, for
    ``spark-submit --extra-properties-file``: how a driver JVM gets the secrets of a
    spec's ``spark.conf`` without a command line showing them. The caller removes it once
    the JVM has started."""
    path = secret_path(DRIVER, f"{os.getpid()}-{secrets.token_hex(8)}.properties")
    lines = "".join(f"{_escaped(key, key=True)}={_escaped(value)}\n" for key, value in conf.items())
    write_new_file(path, lines.encode())
    return path


def _escaped(text: str, *, key: bool = False) -> str:
    """``text`` as java.util.Properties reads it back: backslashes and line breaks
    escaped, and in a key the separators too; a value's leading blank kept."""
    special = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}
    if key:
        special |= {char: "\\" + char for char in " =:#!"}
    escaped = "".join(special.get(char, char) for char in text)
    return escaped if key or not escaped.startswith(" ") else "\\" + escaped
