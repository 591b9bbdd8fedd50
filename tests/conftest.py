"""One shared local[2] SparkSession per test run (a session takes 10-25 s to start)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from streamsmith.config import SparkSpec
from streamsmith.session import build_session

TEST_SPARK = SparkSpec(
    master="local[2]",
    conf={"spark.sql.shuffle.partitions": 2, "spark.default.parallelism": 2},
    log_level="ERROR",
)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session(TEST_SPARK, "streamsmith-tests")
    yield session
    session.stop()
