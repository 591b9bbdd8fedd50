"""Helpers of the Avro and Protobuf value tests: a one-flow spec over a Kafka source, the
quarantine a run left, and the counts that must reconcile."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml
from pyspark.sql import SparkSession

from streamsmith.io.lake import read_table, table_path
from streamsmith.monitor.eventlog import read_events
from streamsmith.monitor.status import query_statuses


def spec_file(
    folder: Path, source: dict[str, Any], sink: dict[str, Any] | None = None, **flow: Any
) -> Path:
    """``streamsmith.yml`` in ``folder``: app ``shop``, Kafka source ``clicks`` (with
    ``source``'s keys) and flow ``clicks`` to ``sink`` (table ``clicks`` by default)."""
    document = {
        "name": "shop",
        "storage_root": "data",
        "kafka": {"bootstrap_servers": "127.0.0.1:9092"},
        "sources": {"clicks": {"format": "kafka", "options": {"subscribe": "clicks"}, **source}},
        "flows": {
            "clicks": {
                "source": "clicks",
                "sql": "SELECT user, ms FROM clicks",
                "sink": sink or {"table": "clicks"},
                **flow,
            }
        },
    }
    path = folder / "streamsmith.yml"
    path.write_text(yaml.safe_dump(document))
    return path


def quarantine(spark: SparkSession, root: Path, table: str) -> list[tuple[Any, ...]]:
    """The quarantine rows of ``table``: offset, reason, raw bytes, source."""
    found = read_table(spark, table_path(root, f"{table}_quarantine")).collect()
    return sorted(
        (int(r.position), r.reason, base64.b64decode(r.raw), r.source_file) for r in found
    )


def reconciled(root: Path, app: str, query: str) -> tuple[int, int, int]:
    """The records ``query`` read, the rows it wrote and those its quarantine kept."""
    events = read_events(root, app)
    batches = [e for e in events if e["event"] == "progress" and e["query"] == query]
    read, written = (sum(e[count] for e in batches) for count in ("input_rows", "output_rows"))
    statuses = {s.query: s for s in query_statuses(events)}
    return read, written, statuses[f"{query}.quarantine"].quarantined
