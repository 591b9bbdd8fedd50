"""Change data capture into a Delta table: each micro-batch of change events merged by
key, type 1 (latest row per key) or type 2 (history), exactly once.

What a table needs to stay a function of the set of changes it was given, whatever
their order (``streamsmith.transforms.cdc``), is kept in a second Delta table inside the
table's folder, under a name starting with ``_`` (Delta's readers, ``VACUUM`` and
streamsmith's listing of tables leave such folders alone; a full refresh removes it with
the table):

- type 1: ``_cdc_tombstones``, the keys whose latest change is a delete, with its
  sequence, so that an update older than the delete, arriving after it, does not bring
  the key back. A tombstone goes when a later update of its key arrives.
- type 2, and type 1 with ``ignore_null_updates``: ``_cdc_changes``, every change (one
  per key and sequence), so that a late change is placed in its key's history exactly as
  a backfill over all the changes places it: the touched keys' versions (or rows) are
  recomputed from their changes (an update's nulls filled from the changes before it).
- with ``apply_as_truncates`` (type 1): ``_cdc_truncates``, one row, the sequence of the
  latest truncation: a row or change at or before it is gone, and one arriving late is
  not applied.

Several flows may apply their changes to one table (SDP's AUTO CDC flows into one
streaming table, each its own query and checkpoint): their batches are applied one at a
time (a lock per table in the run's process), each reading the table and its state as
the one before left them, so the table is that of all their changes together.

Each batch makes one commit to each table (none to ``_cdc_truncates`` unless it
truncates), each carrying the batch's mark (the query and the batch id in the commit's
``userMetadata``: ``streamsmith.io.delta_marks``). Each commit's effect is the
same whether the other was made before it or not, so a batch replayed after a crash
between them (or after both, before the checkpoint's commit) makes the one missing, or
nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from streamsmith.errors import UserError
from streamsmith.io import delta
from streamsmith.io.delta_marks import applied_version
from streamsmith.object_store import remove_tree
from streamsmith.transforms.cdc import (
    DELETED,
    END_AT,
    SEQUENCE,
    START_AT,
    TIE,
    ChangeRules,
    changes,
    fill_null_updates,
    history,
    latest_changes,
    one_per_sequence,
    table_schema,
    tie_break,
    truncations,
)

TOMBSTONES = "_cdc_tombstones"
CHANGE_LOG = "_cdc_changes"
TRUNCATES = "_cdc_truncates"
_ACTION = "__ACTION"


def state_path(path: Path, rules: ChangeRules) -> Path:
    """Where the table at ``path`` keeps its tombstones (type 1) or change log (type 2,
    and type 1 with ``ignore_null_updates``)."""
    return path / (CHANGE_LOG if _logs_changes(rules) else TOMBSTONES)


def _logs_changes(rules: ChangeRules) -> bool:
    return rules.scd_type == 2 or rules.ignore_null_updates


def create_tables(
    spark: SparkSession,
    path: Path,
    events: DataFrame,
    rules: ChangeRules,
    partition_by: Sequence[str] = (),
    settings: delta.TableSettings = delta.NO_SETTINGS,
) -> None:
    """The table (with its declared ``settings``) and its state table, typed from the
    events (a stream or a batch)."""
    typed = changes(events, rules).schema
    delta.create_table(spark, path, table_schema(typed, rules.scd_type), partition_by, settings)
    if _logs_changes(rules):
        state = typed
    else:
        state = StructType([typed[name] for name in (*rules.keys, SEQUENCE)])
    delta.create_table(spark, state_path(path, rules), state)
    if rules.apply_as_truncates:
        delta.create_table(spark, path / TRUNCATES, StructType([typed[SEQUENCE]]))


def written_tables(path: Path, rules: ChangeRules) -> list[Path]:
    """The Delta tables a batch of changes commits to: the table at ``path``, its state
    table, and the truncations' table when the flow applies truncates."""
    truncates = [path / TRUNCATES] if rules.apply_as_truncates else []
    return [path, state_path(path, rules), *truncates]


def apply_changes(
    batch: DataFrame, path: Path, rules: ChangeRules, app_id: str, batch_id: int, where: str
) -> None:
    """Apply the change events of micro-batch ``batch_id`` to the table at ``path``, once
    per ``(app_id, batch_id)``; a replayed batch is still read (``noop``)."""
    side = state_path(path, rules)
    done = [_applied(table, app_id, batch_id) for table in written_tables(path, rules)]
    if all(done):
        batch.write.format("noop").mode("overwrite").save()
        return
    with _lock(path):
        _apply(batch, path, side, rules, app_id, batch_id, where, done)


def _apply(
    batch: DataFrame,
    path: Path,
    side: Path,
    rules: ChangeRules,
    app_id: str,
    batch_id: int,
    where: str,
    done: list[bool],
) -> None:
    """:func:`apply_changes`' commits not ``done`` yet, the table's lock held."""
    session = batch.sparkSession
    events = batch.persist() if rules.apply_as_truncates else batch  # read once for both
    given = one_per_sequence(changes(events, rules), rules).persist()
    try:
        _check_sequences(given, rules, where)
        cut = _truncation(session, path / TRUNCATES, events, rules, where)
        steps: list[Callable[[], None]]
        if _logs_changes(rules):
            steps = [
                lambda: _merge_recomputed(session, path, side, given, rules, cut),
                lambda: _merge_change_log(session, side, given, rules),
            ]
        else:
            latest = _after(latest_changes(given, rules), cut)
            steps = [
                lambda: _merge_latest(session, path, side, latest, rules, cut),
                lambda: _merge_tombstones(session, side, latest, rules),
            ]
        if cut is not None:
            steps.append(lambda: _record_truncation(session, path / TRUNCATES, cut))
        for step, applied in zip(steps, done, strict=True):
            if not applied:
                with delta.marked(session, app_id, batch_id):
                    step()
    finally:
        given.unpersist()
        if events is not batch:
            events.unpersist()


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()


def _lock(path: Path) -> threading.Lock:
    """The lock of the table at ``path``: the flows applying changes to it take turns."""
    with _LOCKS_LOCK:
        return _LOCKS.setdefault(str(path), threading.Lock())


def backfill(
    frame: DataFrame, path: Path, rules: ChangeRules, app_id: str, partition_by: Sequence[str] = ()
) -> None:
    """Replace the table at ``path`` with the changes of ``frame`` (all the input, as
    one batch): the table a stream over the same changes builds."""
    if path.exists():
        remove_tree(path)
    create_tables(frame.sparkSession, path, frame, rules, partition_by)
    apply_changes(frame, path, rules, app_id, 0, f"backfill of {path.name}")


def _applied(path: Path, app_id: str, batch_id: int) -> bool:
    version = applied_version(path, app_id)
    return version is not None and batch_id <= version


def _check_sequences(given: DataFrame, rules: ChangeRules, where: str) -> None:
    """A change without a sequence cannot be ordered: fail, showing one."""
    unordered = given.where(F.col(SEQUENCE).isNull()).drop(SEQUENCE, DELETED).limit(1).collect()
    if unordered:
        raise UserError(
            f"{where}: a change event has no sequence (cdc.sequence_by "
            f"{rules.sequence_by!r} is null), so it cannot be ordered: {unordered[0].asDict()}"
        )


@dataclass(frozen=True)
class _Truncation:
    """The sequence of the table's latest truncation, the batch's included (None: never
    truncated), and whether the batch's reaches it (so rows up to it may remain)."""

    at: Any
    by_batch: bool

    def removes(self, sequence: Column) -> Column:
        return F.lit(False) if self.at is None else sequence <= F.lit(self.at)


def _truncation(
    spark: SparkSession, table: Path, events: DataFrame, rules: ChangeRules, where: str
) -> _Truncation | None:
    """With ``apply_as_truncates``: where the table is truncated, from the sequence kept
    in ``table`` and the batch's truncating events (one job); None without it. A
    truncation without a sequence cannot be placed: it fails the batch."""
    if not rules.apply_as_truncates:
        return None
    kept = spark.read.format("delta").load(str(table)).withColumn("__BATCH", F.lit(False))
    given = truncations(events, rules).withColumn("__BATCH", F.lit(True))
    seq, batch = F.col(SEQUENCE), F.col("__BATCH")
    row = (
        kept.unionByName(given)
        .agg(
            F.max(seq).alias("at"),
            F.max(F.when(batch, seq)).alias("batch"),
            F.max(F.when(~batch, seq)).alias("kept"),
            F.count(F.when(batch & seq.isNull(), 1)).alias("unordered"),
        )
        .select(
            "at",
            (F.col("batch") >= F.coalesce("kept", "batch")).alias("by_batch"),
            "unordered",
        )
        .first()
    )
    assert row is not None
    if row["unordered"]:
        raise UserError(
            f"{where}: {row['unordered']} truncating event(s) (cdc.apply_as_truncates "
            f"{rules.apply_as_truncates!r}) have no sequence (cdc.sequence_by "
            f"{rules.sequence_by!r} is null), so they cannot be ordered"
        )
    return _Truncation(row["at"], bool(row["by_batch"]))


def _after(frame: DataFrame, cut: _Truncation | None) -> DataFrame:
    """The changes of ``frame`` after the truncation (all of them without one)."""
    return frame if cut is None else frame.where(~cut.removes(F.col(SEQUENCE)))


def _truncating(merge: Any, cut: _Truncation | None) -> Any:
    """``merge`` (a Delta merge builder), deleting the rows up to the truncation the batch
    brings (every row not in the batch is read: only when the batch truncates)."""
    if cut is None or not cut.by_batch:
        return merge
    return merge.whenNotMatchedBySourceDelete(cut.removes(F.col(f"t.{SEQUENCE}")))


def _record_truncation(spark: SparkSession, table: Path, cut: _Truncation) -> None:
    """Keep the latest truncation's sequence, when the batch brought it."""
    if not cut.by_batch:
        return
    schema = spark.read.format("delta").load(str(table)).schema
    frame = spark.createDataFrame([(cut.at,)], schema)
    frame.write.format("delta").mode("overwrite").save(str(table))


def _on_keys(rules: ChangeRules, *more: str) -> Column:
    condition = F.lit(True)
    for name in (*rules.keys, *more):
        condition = condition & F.col(f"t.{_q(name)}").eqNullSafe(F.col(f"s.{_q(name)}"))
    return condition


def _source(columns: Sequence[str]) -> dict[str, str | Column]:
    return {_q(c): F.col(f"s.{_q(c)}") for c in columns}


def _merge_latest(
    spark: SparkSession,
    path: Path,
    side: Path,
    latest: DataFrame,
    rules: ChangeRules,
    cut: _Truncation | None,
) -> None:
    """Type 1: a key's row becomes its latest change when that change comes after both
    the row (by sequence; at an equal one, a delete, or an update whose JSON sorts last)
    and the key's tombstone (``latest`` holds no change up to a truncation; a truncation
    the batch brings deletes the rows up to it)."""
    from delta.tables import DeltaTable

    tombstones = spark.read.format("delta").load(str(side)).withColumnRenamed(SEQUENCE, "__TOMB")
    joined = latest.alias("l").join(
        tombstones.alias("d"),
        _null_safe_keys(rules, "l", "d"),
        "left",
    )
    source = joined.select(
        "l.*", F.col("d.__TOMB").alias("__TOMB"), tie_break(rules.columns, "l.").alias(TIE)
    )
    seq, tomb = F.col(f"s.{SEQUENCE}"), F.col("s.__TOMB")
    after_row = (seq > F.col(f"t.{SEQUENCE}")) | (
        (seq == F.col(f"t.{SEQUENCE}"))
        & (F.col(f"s.{DELETED}") | (F.col(f"s.{TIE}") > tie_break(rules.columns, "t.")))
    )
    after_tombstone = tomb.isNull() | (seq > tomb)
    update = ~F.col(f"s.{DELETED}")
    values = _source([*rules.columns, SEQUENCE])
    merge = (
        DeltaTable.forPath(spark, str(path))
        .alias("t")
        .merge(source.alias("s"), _on_keys(rules))
        .whenMatchedDelete(F.col(f"s.{DELETED}") & after_row)
        .whenMatchedUpdate(update & after_row & after_tombstone, values)
        .whenNotMatchedInsert(update & after_tombstone, values)
    )
    _truncating(merge, cut).execute()


def _merge_tombstones(
    spark: SparkSession, side: Path, latest: DataFrame, rules: ChangeRules
) -> None:
    """Type 1: a key whose latest change is a delete keeps a tombstone at that delete's
    sequence; an update after it removes it."""
    from delta.tables import DeltaTable

    seq = F.col(f"s.{SEQUENCE}")
    later = seq > F.col(f"t.{SEQUENCE}")
    deleted = F.col(f"s.{DELETED}")
    (
        DeltaTable.forPath(spark, str(side))
        .alias("t")
        .merge(latest.alias("s"), _on_keys(rules))
        .whenMatchedUpdate(deleted & later, {SEQUENCE: seq})
        .whenMatchedDelete(~deleted & later)
        .whenNotMatchedInsert(deleted, _source([*rules.keys, SEQUENCE]))
        .execute()
    )


def _merge_recomputed(
    spark: SparkSession,
    path: Path,
    side: Path,
    given: DataFrame,
    rules: ChangeRules,
    cut: _Truncation | None,
) -> None:
    """Type 2 (and type 1 with ``ignore_null_updates``): the versions (the row) of every
    key the batch touches, recomputed from all its changes (the change log's and the
    batch's, after the latest truncation, null updates filled), replace that key's
    rows."""
    from delta.tables import DeltaTable

    touched = given.select(*rules.keys).distinct()
    logged = _of_keys(spark.read.format("delta").load(str(side)), touched, rules)
    everything = _after(one_per_sequence(logged.unionByName(given), rules), cut)
    filled = fill_null_updates(everything, rules)
    table = DeltaTable.forPath(spark, str(path)).alias("t")
    if rules.scd_type == 1:
        current = latest_changes(filled, rules)
        deleted = F.col(f"s.{DELETED}")
        merge = (
            table.merge(current.alias("s"), _on_keys(rules))
            .whenMatchedDelete(deleted)
            .whenMatchedUpdate(set=_source([*rules.columns, SEQUENCE]))
            .whenNotMatchedInsert(~deleted, _source([*rules.columns, SEQUENCE]))
        )
        _truncating(merge, cut).execute()
        return
    versions = history(filled, rules)
    current = _of_keys(spark.read.format("delta").load(str(path)), touched, rules)
    gone = current.join(
        versions, [*(current[k].eqNullSafe(versions[k]) for k in rules.keys),
                   current[START_AT] == versions[START_AT]], "left_anti"
    )  # fmt: skip
    source = versions.withColumn(_ACTION, F.lit("upsert")).unionByName(
        gone.withColumn(_ACTION, F.lit("delete"))
    )
    upsert = F.col(f"s.{_ACTION}") == "upsert"
    values = _source([*rules.columns, START_AT, END_AT])
    (
        table.merge(source.alias("s"), _on_keys(rules, START_AT))
        .whenMatchedDelete(~upsert)
        .whenMatchedUpdate(upsert, values)
        .whenNotMatchedInsert(upsert, values)
        .execute()
    )


def _merge_change_log(
    spark: SparkSession, side: Path, given: DataFrame, rules: ChangeRules
) -> None:
    """The batch's changes join the log, one per key and sequence (the same choice
    between two as :func:`streamsmith.transforms.cdc.one_per_sequence`)."""
    from delta.tables import DeltaTable

    source = given.withColumn(TIE, tie_break(rules.columns))
    wins = (F.col(f"s.{DELETED}") & ~F.col(f"t.{DELETED}")) | (
        (F.col(f"s.{DELETED}") == F.col(f"t.{DELETED}"))
        & (F.col(f"s.{TIE}") > tie_break(rules.columns, "t."))
    )
    values = _source([*rules.columns, SEQUENCE, DELETED])
    (
        DeltaTable.forPath(spark, str(side))
        .alias("t")
        .merge(source.alias("s"), _on_keys(rules, SEQUENCE))
        .whenMatchedUpdate(wins, values)
        .whenNotMatchedInsert(values=values)
        .execute()
    )


def _of_keys(table: DataFrame, touched: DataFrame, rules: ChangeRules) -> DataFrame:
    """The rows of ``table`` whose key is one of ``touched`` (null-safe)."""
    condition = [table[k].eqNullSafe(touched[k]) for k in rules.keys]
    return table.join(touched, condition, "left_semi")


def _null_safe_keys(rules: ChangeRules, left: str, right: str) -> Column:
    condition = F.lit(True)
    for name in rules.keys:
        condition = condition & F.col(f"{left}.{_q(name)}").eqNullSafe(F.col(f"{right}.{_q(name)}"))
    return condition


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
