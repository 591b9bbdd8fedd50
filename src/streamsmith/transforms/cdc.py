"""Change data capture, the pure part: change events ordered, deduplicated and folded into
the rows of a slowly changing dimension (SCD type 1 or 2).

A change event carries a key, a sequence (``sequence_by``: what orders the changes of one
key, whatever order they arrive in) and either the key's new row or, when
``apply_as_deletes`` holds, its deletion. Everything here is a function of the *set* of
events, never of their arrival order, which is what lets a stream that sees them in many
micro-batches, a catch-up and a backfill that sees them all at once build the same table:

- Two events of one key with the same sequence are one change: a delete wins over an
  update, and between two updates the one whose row, as JSON (``to_json``), sorts last.
  Give each change its own sequence; this rule only makes the answer deterministic.
- Type 1 (:func:`latest_changes`): a key's row is its latest change, absent when that
  change is a delete.
- ``ignore_null_updates`` (:func:`fill_null_updates`): an update's null value columns
  keep the key's values before it, as if the events were applied in sequence order: the
  last non-null value since the key's latest delete (or none, after a delete).
- ``apply_as_truncates`` (type 1; :func:`truncations`): an event for which it holds is no
  change of its key but a truncation of the table at its sequence: every change at or
  before the latest truncation's sequence is gone, whatever order they arrive in.
- Type 2 (:func:`history`): every run of consecutive updates of a key with equal tracked
  columns is one version, valid from its first change's sequence (``__START_AT``) to the
  sequence of the change that ends it (``__END_AT``: the next version's start, or a
  delete; null while current); the version holds the run's last row, so a change in
  untracked columns only updates the version in place.

The Delta side (merges, the change log and tombstones kept beside the table) is in
``streamsmith.io.cdc``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

SEQUENCE = "__SEQUENCE"
"""Type 1 tables: the sequence of the change a row holds (a later change older than it
changes nothing). In the change log: each change's sequence."""
START_AT = "__START_AT"
"""Type 2 tables: the sequence from which a version holds."""
END_AT = "__END_AT"
"""Type 2 tables: the sequence at which a version stopped holding; null while current."""
DELETED = "__DELETED"
"""In the change log: whether the change deletes its key."""
TIE = "__TIE"
"""While ordering: a row's JSON, which decides between changes with one sequence."""
VERSION = "__VERSION"
RUN = "__RUN"
"""While filling null updates: the number of a key's deletes up to a change."""
RESERVED = (SEQUENCE, START_AT, END_AT, DELETED, TIE, VERSION, RUN)


@dataclass(frozen=True)
class ChangeRules:
    """How a flow's change events apply: the ``cdc`` block of its spec, with the columns
    of the events resolved (:meth:`for_columns` checks them)."""

    keys: tuple[str, ...]
    sequence_by: str
    apply_as_deletes: str | None
    except_columns: tuple[str, ...]
    scd_type: int
    track_history_columns: tuple[str, ...] | None
    columns: tuple[str, ...] = ()  # the table's columns from the events, in their order
    ignore_null_updates: bool = False
    apply_as_truncates: str | None = None  # type 1: a SQL boolean marking truncations

    def for_columns(self, names: Sequence[str]) -> ChangeRules:
        """These rules over events with columns ``names``; ValueError naming what is
        missing or reserved."""
        missing = [
            c
            for c in (*self.keys, *self.except_columns, *(self.track_history_columns or ()))
            if c not in names
        ]
        if missing:
            raise ValueError(
                f"cdc names column(s) {', '.join(dict.fromkeys(missing))} that the flow's "
                f"output lacks (its columns: {', '.join(names)})"
            )
        reserved = [c for c in names if c.upper() in RESERVED]
        if reserved:
            raise ValueError(
                f"the flow's output has column(s) {', '.join(reserved)}, names cdc keeps for "
                "itself: rename them"
            )
        kept = tuple(c for c in names if c not in self.except_columns)
        return replace(self, columns=kept)

    @property
    def values(self) -> tuple[str, ...]:
        """The table's columns that are not keys."""
        return tuple(c for c in self.columns if c not in self.keys)

    @property
    def tracked(self) -> tuple[str, ...]:
        """Type 2: the columns whose change opens a version. By default every non-key
        column but the sequence column itself, which changes with every event (a change
        of it alone is no change of the dimension)."""
        if self.track_history_columns is not None:
            return self.track_history_columns
        return tuple(c for c in self.values if c != self.sequence_by)


def changes(events: DataFrame, rules: ChangeRules) -> DataFrame:
    """The events as changes: the table's columns, ``__SEQUENCE`` and ``__DELETED`` (an
    event whose delete condition is null is an update); truncations are left out (see
    :func:`truncations`). A projection and a filter, so it also types a stream (the
    tables' schemas come from it)."""
    deletes = F.expr(rules.apply_as_deletes) if rules.apply_as_deletes else F.lit(False)
    if rules.apply_as_truncates:
        events = events.where(~_truncates(rules.apply_as_truncates))
    return events.select(
        *rules.columns,
        F.expr(rules.sequence_by).alias(SEQUENCE),
        F.coalesce(deletes, F.lit(False)).alias(DELETED),
    )


def truncations(events: DataFrame, rules: ChangeRules) -> DataFrame:
    """The sequences (``__SEQUENCE``) of the events that truncate the table: those for
    which ``apply_as_truncates`` holds (none without it)."""
    if not rules.apply_as_truncates:
        return events.limit(0).select(F.expr(rules.sequence_by).alias(SEQUENCE))
    truncating = events.where(_truncates(rules.apply_as_truncates))
    return truncating.select(F.expr(rules.sequence_by).alias(SEQUENCE))


def _truncates(condition: str) -> Column:
    return F.coalesce(F.expr(condition), F.lit(False))


def fill_null_updates(changes: DataFrame, rules: ChangeRules) -> DataFrame:
    """With ``ignore_null_updates``, each update's null value columns take the key's value
    before it: the last non-null one (by sequence) among the key's updates since its
    latest delete, or null when there is none. Over all of a key's changes (one per
    sequence), so the answer does not depend on the order they arrived in. Without it,
    the changes as they are. E.g. updates ``(1, 'Ann', 'Oslo')`` at 1 and ``(1, null,
    'Rome')`` at 2 fill the second as ``(1, 'Ann', 'Rome')``.
    """
    if not rules.ignore_null_updates:
        return changes
    order = Window.partitionBy(*rules.keys).orderBy(SEQUENCE)
    upto = Window.unboundedPreceding, Window.currentRow
    deletes = F.sum(F.col(DELETED).cast("int")).over(order.rowsBetween(*upto))
    runs = changes.withColumn(RUN, deletes)
    run = Window.partitionBy(*rules.keys, RUN).orderBy(SEQUENCE).rowsBetween(*upto)
    kept = {
        c: F.last(F.when(~F.col(DELETED), F.col(c)), ignorenulls=True).over(run).alias(c)
        for c in rules.values
    }
    return runs.select(*[kept.get(c, F.col(c)) for c in changes.columns if c != RUN])


def tie_break(columns: Sequence[str], prefix: str = "") -> Column:
    """The JSON of a row's ``columns`` (read as ``prefix.column``), which orders changes
    that share a key and a sequence."""
    return F.to_json(F.struct(*[F.col(f"{prefix}{c}").alias(c) for c in columns]))


def one_per_sequence(changes: DataFrame, rules: ChangeRules) -> DataFrame:
    """One change per key and sequence: the delete, else the update whose JSON sorts last."""
    return _last(changes, rules, (*rules.keys, SEQUENCE))


def latest_changes(changes: DataFrame, rules: ChangeRules) -> DataFrame:
    """Type 1: each key's latest change (by sequence, then as :func:`one_per_sequence`)."""
    return _last(changes, rules, rules.keys)


def _last(changes: DataFrame, rules: ChangeRules, group: Sequence[str]) -> DataFrame:
    ranked = changes.withColumn(TIE, tie_break(rules.columns))
    order = Window.partitionBy(*group).orderBy(
        F.col(SEQUENCE).desc(), F.col(DELETED).desc(), F.col(TIE).desc()
    )
    return (
        ranked.withColumn(VERSION, F.row_number().over(order))
        .where(F.col(VERSION) == 1)
        .drop(VERSION, TIE)
    )


def history(changes: DataFrame, rules: ChangeRules) -> DataFrame:
    """Type 2: the versions of each key from all its changes (one per sequence, see
    :func:`one_per_sequence`): the table's columns with ``__START_AT`` and ``__END_AT``.

    An update opens a version when it is the key's first change, follows a delete, or
    differs from the change before it in a tracked column (null-safe); a version ends
    where the change after its last update is (that change's sequence).
    """
    order = Window.partitionBy(*rules.keys).orderBy(SEQUENCE)
    before = F.lag(DELETED).over(order)
    same = reduce(
        lambda a, b: a & b,
        [F.col(c).eqNullSafe(F.lag(c).over(order)) for c in rules.tracked],
        F.lit(True),
    )
    opens = ~F.col(DELETED) & (before.isNull() | before | ~same)
    running = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    marked = changes.select(
        "*",
        F.sum(opens.cast("int")).over(running).alias(VERSION),
        F.lead(SEQUENCE).over(order).alias(END_AT),
    ).where(~F.col(DELETED))
    last = F.max_by(F.struct(*rules.values, END_AT), F.col(SEQUENCE))
    versions = marked.groupBy(*rules.keys, VERSION).agg(
        F.min(SEQUENCE).alias(START_AT), last.alias("__last")
    )
    return versions.select(
        *[F.col(c) for c in rules.keys],
        *[F.col(f"__last.{c}").alias(c) for c in rules.values],
        START_AT,
        F.col(f"__last.{END_AT}").alias(END_AT),
    ).select(*rules.columns, START_AT, END_AT)


def table_schema(changes_schema: StructType, scd_type: int) -> StructType:
    """The table's schema from that of :func:`changes`: type 1 keeps ``__SEQUENCE``,
    type 2 has ``__START_AT`` and ``__END_AT`` of the sequence's type instead."""
    data = [f for f in changes_schema.fields if f.name not in (SEQUENCE, DELETED)]
    sequence = changes_schema[SEQUENCE].dataType
    if scd_type == 1:
        return StructType([*data, changes_schema[SEQUENCE]])
    return (
        StructType(data).add(START_AT, sequence, nullable=True).add(END_AT, sequence, nullable=True)
    )
