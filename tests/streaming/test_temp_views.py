"""Flows' SQL started together over one session: each query reads its own frame under
the source's name (a run starts its flows' queries in threads; temporary views are the
session's, by name)."""

from __future__ import annotations

import threading

from pyspark.sql import DataFrame, SparkSession

from streamsmith.spark.temp_views import sql_over


def test_sql_started_together_binds_each_query_to_its_own_frame(spark: SparkSession) -> None:
    with_window = spark.range(1).selectExpr("id AS user", "1 AS window")
    without = spark.range(1).selectExpr("id AS user")
    rounds = 40
    barrier = threading.Barrier(2)
    got: dict[str, list[list[str]]] = {"with": [], "without": []}

    def flow(label: str, frame: DataFrame) -> None:
        for _ in range(rounds):
            barrier.wait()
            got[label].append(sql_over(spark, "SELECT * FROM clicks", {"clicks": frame}).columns)

    threads = [
        threading.Thread(target=flow, args=("with", with_window)),
        threading.Thread(target=flow, args=("without", without)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got == {"with": [["user", "window"]] * rounds, "without": [["user"]] * rounds}
