"""Session settings that hold for a block only, and the start of ``foreachBatch`` queries.

A streaming query runs its batches in a copy of the session made when it starts, with the
session's settings at that moment: a setting in force only while ``start()`` runs is the
query's own for its whole life and nobody else's after it."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.readwriter import DataStreamWriter

# Spark's ForeachBatchSink hands each micro-batch to the function as a new plan over the
# batch's rows (LogicalRDD.fromDataset), and derives the optimised plan's constraints for
# it, every batch. A projection of many CASE WHEN columns over filtered ones (the
# cloudtrail app's) makes that derivation grow combinatorially: its batch 0 was still in
# Project.getAllValidConstraints after more than a minute of CPU. Constraints only infer
# extra filters, so a foreachBatch query runs without them.
CONSTRAINTS = "spark.sql.constraintPropagation.enabled"
_STARTING = threading.Lock()


@contextmanager
def session_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """``settings`` in force in ``spark`` for the block; each key's value before (or its
    absence) is restored after."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def start_foreach_batch_writer(spark: SparkSession, writer: DataStreamWriter) -> StreamingQuery:
    """Start ``writer`` (a ``foreachBatch`` one over ``spark``) with constraint propagation
    off in its query's session (see ``CONSTRAINTS``). These starts are serialised; a
    query of another kind started by another thread at that moment copies the setting
    too, which changes only the filters its optimiser infers, not its results."""
    with _STARTING, session_conf(spark, {CONSTRAINTS: "false"}):
        return writer.start()
