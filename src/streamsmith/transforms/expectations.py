"""Expectations: rules a flow's records should meet, each with what a failure does.

A record passes an expectation only when its SQL expression is true (null fails, as a
missing value cannot be vouched for). Each expectation is judged on every record that
was read and parsed, independently of the others, so its counts say how much of the
input meets it; the actions then apply in order of severity: ``fail`` stops the batch,
``quarantine`` sends the record to the quarantine table with ``expectation <name>
failed`` as the reason, ``drop`` leaves it out, ``warn`` only counts it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType

from streamsmith.transforms.quarantine import REJECT_REASON, TAG_COLUMNS

Action = Literal["warn", "drop", "quarantine", "fail"]
# The observed metric of a flow's expectations: one count of failures per expectation,
# and ``rows``, the records judged.
EXPECTATIONS_METRIC = "expectations"
ROWS = "rows"


@dataclass(frozen=True)
class Expectation:
    """``name``: an identifier; ``sql``: a SQL boolean over the record; ``action``."""

    name: str
    sql: str
    action: Action = "warn"

    @property
    def failed(self) -> Column:
        """True for a record that does not meet the expectation."""
        return ~F.coalesce(F.expr(self.sql).cast("boolean"), F.lit(False))

    @property
    def reason(self) -> str:
        return f"expectation {self.name} failed"


class ExpectationError(ValueError):
    """An expectation that cannot judge records: its SQL is not a boolean over them."""

    def __init__(self, expectation: Expectation, problem: str) -> None:
        super().__init__(f"expectation {expectation.name} ({expectation.sql!r}) {problem}")
        self.expectation = expectation


def check_expectations(frame: DataFrame, expectations: Sequence[Expectation]) -> None:
    """Raise :class:`ExpectationError` for an expectation whose SQL does not analyse over
    ``frame`` or is not a boolean (Spark would cast ``amount`` or ``'yes'`` to one and
    judge something else than meant). Only the plan is analysed; nothing runs."""
    for expectation in expectations:
        try:
            kind = frame.select(F.expr(expectation.sql).alias("judged")).schema[0].dataType
        except (AnalysisException, ParseException) as exc:
            first = next((line for line in str(exc).splitlines() if line.strip()), str(exc))
            raise ExpectationError(expectation, f"cannot be judged: {first.rstrip(';')}") from None
        if not isinstance(kind, BooleanType):
            raise ExpectationError(
                expectation,
                f"is a {kind.simpleString()}, not a boolean: write a condition such as "
                "`amount > 0`",
            )


def quarantine_failures(tagged: DataFrame, expectations: Sequence[Expectation]) -> DataFrame:
    """``tagged`` with the records failing a ``quarantine`` expectation rejected (records
    already rejected keep their first reason)."""
    checks = [e for e in expectations if e.action == "quarantine"]
    if not checks:
        return tagged
    reasons = [F.when(e.failed, F.lit(e.reason)) for e in checks]
    return tagged.withColumn(REJECT_REASON, F.coalesce(F.col(REJECT_REASON), *reasons))


def counted(
    frame: DataFrame,
    expectations: Sequence[Expectation],
    judged: Column | None = None,
    observation: Observation | None = None,
) -> DataFrame:
    """``frame`` observing, per batch, how many of the ``judged`` records (all, if None)
    fail each expectation, as the metric ``EXPECTATIONS_METRIC`` of a stream's progress,
    or into ``observation`` (a batch job's)."""
    if not expectations:
        return frame
    judged = judged if judged is not None else F.lit(True)
    failures = [
        F.sum(F.when(judged & e.failed, 1).otherwise(0)).alias(e.name) for e in expectations
    ]
    rows = F.sum(F.when(judged, 1).otherwise(0)).alias(ROWS)
    return frame.observe(observation or EXPECTATIONS_METRIC, rows, *failures)


def enforced(events: DataFrame, expectations: Sequence[Expectation]) -> DataFrame:
    """Accepted events after ``fail`` (the batch fails, naming the expectation and the
    record) and ``drop`` expectations."""
    for expectation in (e for e in expectations if e.action == "fail"):
        record = F.to_json(F.struct(*[c for c in events.columns if c not in TAG_COLUMNS]))
        message = F.concat(F.lit(f"{expectation.reason} on record "), record)
        events = events.where(F.when(expectation.failed, F.raise_error(message)).otherwise(True))
    drops = [e.failed for e in expectations if e.action == "drop"]
    for failed in drops:
        events = events.where(~failed)
    return events
