"""A streaming batch that fails in Python (a foreachBatch write, a CDC merge) says what
failed, in which record, in one line: Spark wraps the Python error in a Py4J message whose
first line is only ``Traceback (most recent call last):``."""

from __future__ import annotations

import json
from collections.abc import Callable
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


def failure(
    spark: SparkSession, folder: Path, name: str, write: Callable[[DataFrame, int], None]
) -> StreamingQueryException:
    """How the query ``name`` fails when each batch of one record goes to ``write``."""
    (folder / "in").mkdir()
    (folder / "in" / "a.json").write_text(json.dumps({"country": "Kenya"}) + "\n")
    query = (
        spark.readStream.schema("country string, year int").json(str(folder / "in"))
        .writeStream.queryName(name).foreachBatch(write)
        .option("checkpointLocation", str(folder / "checkpoint"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    caught: Any = None
    try:
        with pytest.raises(StreamingQueryException) as caught:
            query.awaitTermination()
    finally:
        query.stop()
    return caught.value


def test_a_python_failure_in_a_batch_is_named_in_one_line(
    spark: SparkSession, tmp_path: Path
) -> None:
    error = failure(spark, tmp_path, "failure_cause", _refuse)
    expected = f"UserError: {CAUSE}"
    assert expected in _message(error)
    assert expected in first_line(str(error))
    assert "\n" not in _message(error)


def _writing_failing(out: Path) -> Callable[[DataFrame, int], None]:
    def write(batch: DataFrame, batch_id: int) -> None:
        failing = batch.selectExpr(
            "country", "coalesce(year, raise_error(concat('no year for ', country))) AS year"
        )
        failing.write.format("delta").mode("append").save(str(out))  # Delta: not converted

    return write


def test_a_spark_write_failing_in_a_batch_is_named_by_its_root_cause(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A Spark call in the function fails (a flow's Delta append meeting a failed
    expectation): py4j's ``Py4JJavaError`` names only the call; the Java error's root
    cause says what failed."""
    error = failure(spark, tmp_path, "failure_root_cause", _writing_failing(tmp_path / "out"))
    message = _message(error)
    assert "SparkRuntimeException: [USER_RAISED_EXCEPTION] no year for Kenya" in message, message
    assert "Py4JJavaError" not in message and "\n" not in message
