"""Serve SQL to other tools over JDBC/ODBC: Spark's Thrift server inside a running session.

The seeds' promise to "expose results directly to interactive queries through Spark's
JDBC server". The server (``HiveThriftServer2``, shipped in the pyspark wheel) runs inside
the given session, so JDBC clients see what that session sees: the lake tables
registered as views and, inside ``streamsmith run --sql-port``, the memory tables of the
running app. Clients share that one session (``singleSession``, set by
``streamsmith.spark.session``). It listens on loopback only and asks for no password: put a
proxy with authentication in front of it before exposing it beyond the machine.
"""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from streamsmith.errors import UserError
from streamsmith.spark import jvm

LOOPBACK = "127.0.0.1"
_PROMPT = re.compile(r"^\d+: jdbc:\S*> ", re.MULTILINE)


@dataclass
class SqlServer:
    """A running Thrift JDBC server; :meth:`stop` ends it (the session stays up)."""

    port: int
    handle: Any

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:hive2://{LOOPBACK}:{self.port}/default"

    def stop(self) -> None:
        self.handle.stop()


def start_sql_server(spark: SparkSession, port: int) -> SqlServer:
    """Start the Thrift server on ``127.0.0.1:port`` inside ``spark``."""
    spark.conf.set("hive.server2.thrift.port", str(port))
    spark.conf.set("hive.server2.thrift.bind.host", LOOPBACK)
    spark.conf.set("hive.server2.transport.mode", "binary")
    return SqlServer(port, jvm.start_thrift_server(spark))


def beeline_query(
    server: str, sql: str, timeout_s: float = 120
) -> tuple[list[str], list[list[str]]]:
    """Run ``sql`` on the JDBC server at ``host:port`` with the wheel's beeline; returns
    the column names and the rows as text. Errors name the server and beeline's message."""
    import pyspark

    spark_home = Path(pyspark.__file__).parent
    command = [
        str(spark_home / "bin" / "beeline"), "-u", f"jdbc:hive2://{server}/default",
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
