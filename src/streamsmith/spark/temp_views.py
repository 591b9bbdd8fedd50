"""Temporary views bound by name for SQL that reads them.

A run starts its flows' queries together, each in its own thread, over one session
(``runtime.start.together``), and a session's temporary views are shared by name: two
SQL flows over the source ``clicks`` bind different frames (one with the ``window`` its
event time adds, one without) to the same name. Binding and analysing under one lock
keeps each query's plan on its own frames; once analysed, a plan holds the frames, not
the name, so a later binding changes nothing."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession

_BINDING = threading.Lock()


def sql_over(
    spark: SparkSession, query: str, views: Mapping[str, DataFrame], **args: Any
) -> DataFrame:
    """``query`` analysed with each of ``views`` bound to its name, by no other thread
    between binding and analysis (``args`` go to ``spark.sql`` as they are)."""
    with _BINDING:
        for name, frame in views.items():
            frame.createOrReplaceTempView(name)
        return spark.sql(query, **args)
