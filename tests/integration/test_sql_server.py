"""Spark's Thrift JDBC server inside a session: lake tables and live memory tables, queried
by real JDBC clients (the pyspark wheel's beeline, and `streamsmith query --server`)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from streamsmith.io.lake import register_lake_views, table_path, write_table
from streamsmith.processes import free_port
from streamsmith.runtime.sql_server import beeline_query, start_sql_server


def beeline_refusal(port: int, login: list[str]) -> str:
    """The error beeline prints for ``login`` against the server on ``port``."""
    import pyspark

    home = Path(pyspark.__file__).parent
    result = subprocess.run(
        [str(home / "bin" / "beeline"), "-u", f"jdbc:hive2://127.0.0.1:{port}/default",
         *login, "--silent=true", "-e", "SELECT 1"],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "SPARK_HOME": str(home)}, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return result.stdout + result.stderr


def test_jdbc_clients_see_lake_tables_and_a_running_query_memory_table(
    spark: SparkSession, tmp_path: Path
) -> None:
    # As a pipeline reading a broker with a SASL login leaves the JVM: Kafka's PLAIN
    # provider registered, which must not take the JDBC logins.
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    jvm.org.apache.kafka.common.security.plain.internals.PlainSaslServerProvider.initialize()
    write_table(
        spark.createDataFrame([("a", 3), ("b", 4)], "user string, n long"),
        table_path(tmp_path, "user_totals"),
    )
    register_lake_views(spark, tmp_path)
    (tmp_path / "in").mkdir()
    (tmp_path / "in/1.json").write_text('{"k": "x"}\n{"k": "x"}\n{"k": "y"}\n')
    live = (
        spark.readStream.schema("k string").json(str(tmp_path / "in"))
        .groupBy("k").count()
        .writeStream.format("memory").queryName("live_counts").outputMode("complete")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )  # fmt: skip
    server = start_sql_server(spark, free_port())
    try:
        live.processAllAvailable()
        totals = beeline_query(
            f"127.0.0.1:{server.port}", "SELECT sum(n) AS total FROM user_totals"
        )
        counts = subprocess.run(
            [sys.executable, "-m", "streamsmith", "query", "--format", "json",
             "--server", f"127.0.0.1:{server.port}",
             "SELECT k, `count` FROM live_counts ORDER BY k"],
            capture_output=True, text=True, timeout=300, check=False,
            env={k: v for k, v in os.environ.items() if k != "STREAMSMITH_ROOT"},
        )  # fmt: skip
        bad = subprocess.run(
            [sys.executable, "-m", "streamsmith", "query",
             "--server", f"127.0.0.1:{server.port}", "SELECT * FROM no_such_table"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        refused = [
            beeline_refusal(server.port, login) for login in ([], ["-n", "someone", "-p", "guess"])
        ]
        assert stat.S_IMODE(server.secret_file.stat().st_mode) == 0o600
        secret = server.secret_file.read_text()
    finally:
        server.stop()
        live.stop()

    # Without the secret (no password, a wrong one) a client is turned away, and the
    # secret is on no command line: streamsmith's clients hand beeline the file.
    assert all("Could not open client transport" in message for message in refused), refused
    assert len(secret) == 64
    assert not server.secret_file.exists()  # forgotten with the server

    assert totals == (["total"], [["7"]])
    assert counts.returncode == 0, counts.stderr
    lines = [json.loads(line) for line in counts.stdout.splitlines() if line.strip()]
    assert lines == [{"k": "x", "count": "2"}, {"k": "y", "count": "1"}]
    assert bad.returncode == 2
    assert "query on 127.0.0.1" in bad.stderr and "no_such_table" in bad.stderr.lower()
