"""Two DataFrames compared as multisets of rows: what the prefix-integrity harness
(``streamsmith.testing``) reports for a sink against the batch result."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


@dataclass(frozen=True)
class Difference:
    """What :func:`multiset_difference` found."""

    compared: int  # rows of the batch result compared
    excluded: int  # rows of both sides left out: keys a dropped late event touched
    missing: tuple[str, ...]
    unexpected: tuple[str, ...]


_SHOWN = 20  # rows of each kind a failed comparison shows
_EXPECTED, _STREAMED, _TOUCHED = "__expected_rows", "__streamed_rows", "__touched"


def multiset_difference(
    expected: DataFrame, streamed: DataFrame, touched: DataFrame | None
) -> Difference:
    """``expected`` and ``streamed`` (same columns) as multisets of rows, in two Spark jobs
    over one aggregate (counts, an anti join and two ``exceptAll``s took up to eight):
    rows whose key is in ``touched`` are counted as excluded, not compared (a key with a
    null is never touched, as in a join). Up to ``_SHOWN`` rows of each kind are kept."""
    columns = expected.columns
    both = expected.select(*columns, F.lit(1).alias(_EXPECTED)).union(
        streamed.select(*columns, F.lit(0).alias(_EXPECTED))
    )
    if touched is None:
        both = both.withColumn(_TOUCHED, F.lit(False))
    else:
        marked = touched.select(*touched.columns, F.lit(True).alias(_TOUCHED))
        both = both.join(marked, touched.columns, "left").select(
            *columns, _EXPECTED, F.coalesce(F.col(_TOUCHED), F.lit(False)).alias(_TOUCHED)
        )
    side = F.col(_EXPECTED) == 1
    grouped = both.groupBy(*columns).agg(
        F.sum(side.cast("long")).alias(_EXPECTED),
        F.sum((~side).cast("long")).alias(_STREAMED),
        F.max(F.col(_TOUCHED)).alias(_TOUCHED),
    )
    kept, rows = ~F.col(_TOUCHED), F.col(_EXPECTED) + F.col(_STREAMED)
    totals = grouped.agg(
        F.sum(F.when(kept, F.col(_EXPECTED)).otherwise(0)),
        F.sum(F.when(~kept, rows).otherwise(0)),
    ).first()
    differing = grouped.where(kept & (F.col(_EXPECTED) != F.col(_STREAMED)))
    missing: list[str] = []
    unexpected: list[str] = []
    for row in differing.limit(4 * _SHOWN).collect():
        text = str(tuple(row[: len(columns)]))
        surplus = row[_EXPECTED] - row[_STREAMED]
        found = missing if surplus > 0 else unexpected
        found.extend([text] * min(abs(surplus), _SHOWN - len(found)))
    compared, excluded = (int(value or 0) for value in (totals or (0, 0)))
    return Difference(compared, excluded, tuple(missing), tuple(unexpected))
