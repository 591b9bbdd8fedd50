"""The user's Python flow: flights and delays per origin and day."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def daily_delays(flights: DataFrame) -> DataFrame:
    """Per 1-day window (the spec's ``event_time``) and origin: flights, their total
    arrival delay and the longest departure delay."""
    return flights.groupBy("window", "origin").agg(
        F.count(F.lit(1)).alias("flights"),
        F.sum("arr_delay").alias("total_arr_delay"),
        F.max("dep_delay").alias("max_dep_delay"),
    )
