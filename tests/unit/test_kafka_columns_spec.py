"""``kafka_columns``: refused where it cannot mean anything, at spec load and dry-run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from streamsmith.errors import UserError
from streamsmith.pipelines import load_pipeline


def spec(tmp_path: Path, source: dict[str, object]) -> Path:
    path = tmp_path / "streamsmith.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "p",
                "sources": {"s": source},
                "flows": {"f": {"source": "s", "sql": "SELECT * FROM s", "sink": {"table": "t"}}},
            }
        )
    )
    return path


def test_a_column_named_like_a_field_is_refused(tmp_path: Path) -> None:
    options = {"subscribe": "x", "kafka.bootstrap.servers": "127.0.0.1:9"}
    source = {"format": "kafka", "options": options, "schema": "key string, n int",
              "kafka_columns": ["key", "timestamp"]}  # fmt: skip
    with pytest.raises(UserError, match=r"kafka_columns: key is also a field of the record"):
        load_pipeline(spec(tmp_path, source))


def test_kafka_columns_need_a_kafka_source(tmp_path: Path) -> None:
    source = {"format": "jsonl", "path": "in", "schema": "n int", "kafka_columns": ["key"]}
    with pytest.raises(UserError, match=r"kafka_columns are a Kafka record's: set format: kafka"):
        load_pipeline(spec(tmp_path, source))
