"""Kafka's storage is formatted whatever the random cluster id: one in 64 starts with
"-", which the storage tool took for an option (a flaky broker start in CI)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from streamsmith.io.kafka import broker
from streamsmith.processes import free_port


def test_a_cluster_id_starting_with_a_dash_formats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dash_first = uuid.UUID(bytes=b"\xf8" + bytes(15))  # base64url: "-AAA..."
    monkeypatch.setattr(broker.uuid, "uuid4", lambda: dash_first)
    properties = tmp_path / broker.PROPERTIES
    properties.write_text(
        broker._server_properties(tmp_path, free_port(), free_port(), {"streamsmith": "s3cret"})
    )
    (tmp_path / "log4j2.properties").write_text(broker._LOG4J, encoding="utf-8")
    broker._format_storage(tmp_path, properties)
    meta = (tmp_path / "data" / "meta.properties").read_text()
    assert "cluster.id=-AAAAAAAAAAAAAAAAAAAAA" in meta
