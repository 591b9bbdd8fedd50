"""Serve SQL to other tools over JDBC/ODBC: Spark's Thrift server inside a running session.

The seeds' promise to "expose results directly to interactive queries through Spark's
JDBC server". The server (``HiveThriftServer2``, shipped in the pyspark wheel) runs inside
the given session, so JDBC clients see what that session sees: the lake tables
registered as views and, inside ``streamsmith run --sql-port``, the memory tables of the
running app. Clients share that one session (``singleSession``, set by
``streamsmith.spark.session``). It listens on loopback only and lets in only clients that
give the secret generated when it started (``streamsmith.spark.auth``: a file readable by
this user only; streamsmith's own clients find it by the server's address), checked by
streamsmith's password class (authentication ``CUSTOM``). JDBC clients log in with any
user name and that secret as password.
"""

from __future__ import annotations

import csv
import getpass
import io
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from streamsmith.errors import UserError
from streamsmith.spark import auth, jvm

LOOPBACK = "127.0.0.1"
AUTHENTICATOR = "io.streamsmith.auth.SecretAuthenticator"  # spark/java/SecretAuthenticator.java
SECRET_FILE_PROPERTY = "streamsmith.sql.secretFile"
_PROMPT = re.compile(r"^\d+: jdbc:\S*> ", re.MULTILINE)


@dataclass
class SqlServer:
    """A running Thrift JDBC server; :meth:`stop` ends it (the session stays up)."""

    port: int
    handle: Any
    secret_file: Path

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:hive2://{self.address}/default"

    def stop(self) -> None:
        self.handle.stop()
        auth.forget_secret(auth.SQL_SERVER, self.address)


def start_sql_server(spark: SparkSession, port: int) -> SqlServer:
    """Start the Thrift server on ``127.0.0.1:port`` inside ``spark``, behind a fresh secret."""
    secret_file, _ = auth.new_secret(auth.SQL_SERVER, f"{LOOPBACK}:{port}")
    jvm.set_system_property(spark, SECRET_FILE_PROPERTY, str(secret_file))
    spark.conf.set("hive.server2.thrift.port", str(port))
    spark.conf.set("hive.server2.thrift.bind.host", LOOPBACK)
    spark.conf.set("hive.server2.transport.mode", "binary")
    spark.conf.set("hive.server2.authentication", "CUSTOM")
    # Hive builds a fresh HiveConf to find the class: it reads system properties, not
    # the session's conf.
    jvm.set_system_property(spark, "hive.server2.custom.authentication.class", AUTHENTICATOR)
    return SqlServer(port, jvm.start_thrift_server(spark), secret_file)


def beeline_query(
    server: str, sql: str, timeout_s: float = 120
) -> tuple[list[str], list[list[str]]]:
    """Run ``sql`` on the JDBC server at ``host:port`` with the wheel's beeline; returns
    the column names and the rows as text. Errors name the server and beeline's message.
    A server streamsmith started gets its secret (``-w``, a file: never on the command
    line)."""
    import pyspark

    spark_home = Path(pyspark.__file__).parent
    secret = auth.existing_secret(auth.SQL_SERVER, server)
    login = ["-n", getpass.getuser(), "-w", str(secret)] if secret is not None else []
    command = [
        str(spark_home / "bin" / "beeline"), "-u", f"jdbc:hive2://{server}/default", *login,
        "--outputformat=csv2", "--silent=true", "--showHeader=true", "-e", sql,
    ]  # fmt: skip
    env = {**os.environ, "SPARK_HOME": str(spark_home)}
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
    )
    failure = next(
        (line for line in result.stderr.splitlines() if line.startswith(("Error:", "No current"))),
        None,
    )
    if result.returncode != 0 or failure:
        detail = failure or result.stderr.strip().splitlines()[-1:] or ["no output"]
        raise UserError(
            f"query on {server} failed: {detail if isinstance(detail, str) else detail[0]}"
        )
    # Beeline echoes its prompt ("0: jdbc:hive2://...> ") before the output, even silent.
    text = _PROMPT.sub("", result.stdout)
    table = [row for row in csv.reader(io.StringIO(text)) if row]
    return (table[0], table[1:]) if table else ([], [])
