"""A streaming batch that fails in Python (a foreachBatch write, a CDC merge) says what
failed, in which record, in one line: Spark wraps the Python error in a Py4J message whose
first line is only ``Traceback (most recent call last):``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from streamsmith.errors import UserError
from streamsmith.monitor.recorder import first_line
from streamsmith.runtime.supervisor import _message

CAUSE = "a change event has no sequence (cdc.sequence_by 'year' is null): {'country': 'Kenya'}"


def _refuse(batch: DataFrame, batch_id: int) -> None:
    raise UserError(CAUSE)


def test_a_python_failure_in_a_batch_is_named_in_one_line(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text(json.dumps({"country": "Kenya"}) + "\n")
    query = (
        spark.readStream.schema("country string, year int").json(str(tmp_path / "in"))
        .writeStream.queryName("failure_cause").foreachBatch(_refuse)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    caught: Any = None
    try:
        with pytest.raises(StreamingQueryException) as caught:
            query.awaitTermination()
    finally:
        query.stop()
    expected = f"UserError: {CAUSE}"
    assert expected in _message(caught.value)
    assert expected in first_line(str(caught.value))
    assert "\n" not in _message(caught.value)
