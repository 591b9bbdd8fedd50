"""Child process of the PostgreSQL exactly-once tests: run the actions app with a fault.

``python actions_child.py ROOT FAULT BATCH [PG_HOME]`` runs ``streamsmith run actions
--trigger available-now`` (one file per micro-batch) on the storage root ROOT, with the
PostgreSQL DSN from ``$STREAMSMITH_PG_DSN`` and one injected fault on micro-batch BATCH
of the ``action_counts`` sink:

- ``none``: no fault;
- ``kill-after-commit``: SIGKILL the whole process group right after the batch's
  PostgreSQL transaction commits, before Spark records the batch as done, so the restart
  replays a batch the database already has;
- ``stop-db-mid-batch``: stop the PostgreSQL server in PG_HOME (immediate mode, a crash)
  after the batch's rows are staged and before its transaction commits; only the first
  time, so the supervisor's restart (after the test starts the server again) goes on.

Further arguments are ``--set`` values for the run (e.g. notification targets).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import psycopg

from streamsmith.cli import cli
from streamsmith.io.postgres import sink
from streamsmith.io.postgres.server import stop_postgres
from streamsmith.io.sinks import postgres as postgres_sink

FAULTY_TABLE = "action_counts"


def main(root: str, fault: str, batch: str, pg_home: str = "", *sets: str) -> None:
    faulty_batch = int(batch)
    write_batch = postgres_sink.write_batch
    stage = sink._stage

    def write_then_die(target: sink.PostgresTarget, frame: Any, batch_id: int, query: str) -> bool:
        written = write_batch(target, frame, batch_id, query)
        if target.table == FAULTY_TABLE and batch_id == faulty_batch:
            os.killpg(os.getpgid(0), signal.SIGKILL)
        return written

    def stage_then_stop_db(conn: psycopg.Connection[Any], target: Any, frame: Any) -> int:
        rows = stage(conn, target, frame)
        query_batch = frame.sparkSession.sparkContext.getLocalProperty("streaming.sql.batchId")
        stopped_once = Path(root) / "db-stopped"
        faulty = target.table == FAULTY_TABLE and query_batch == str(faulty_batch)
        if faulty and not stopped_once.exists():
            stopped_once.touch()
            stop_postgres(Path(pg_home), mode="immediate")
        return rows

    if fault == "kill-after-commit":
        postgres_sink.write_batch = write_then_die  # type: ignore[assignment]
    elif fault == "stop-db-mid-batch":
        sink._stage = stage_then_stop_db  # type: ignore[assignment]
    elif fault != "none":
        raise SystemExit(f"unknown fault {fault!r}")
    options = ["--trigger", "available-now", "--set", "sources.actions.max_files_per_trigger=1"]
    options += [arg for value in sets for arg in ("--set", value)]
    cli(["run", "actions", "--root", root, *options])


if __name__ == "__main__":
    main(*sys.argv[1:])
