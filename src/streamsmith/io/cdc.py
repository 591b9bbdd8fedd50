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
- type 2: ``_cdc_changes``, every change (one per key and sequence), so that a late
  change is placed in its key's history exactly as a backfill over all the changes
  places it: the touched keys' versions are recomputed from their changes.

Each batch makes one commit to each table, both carrying Delta's idempotent-write marks
(the query as ``txnAppId``, the batch id as ``txnVersion``). Each commit's effect is the
same whether the other was made before it or not, so a batch replayed after a crash
between them (or after both, before the checkpoint's commit) makes the one missing, or
nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from streamsmith.errors import UserError
from streamsmith.io import delta
from streamsmith.object_store import remove_tree
from streamsmith.transforms.cdc import (
    DELETED,
    END_AT,
    SEQUENCE,
    START_AT,
    TIE,
    ChangeRules,
    changes,
    history,
    latest_changes,
    one_per_sequence,
    table_schema,
    tie_break,
)

TOMBSTONES = "_cdc_tombstones"
CHANGE_LOG = "_cdc_changes"
_ACTION = "__ACTION"


def state_path(path: Path, rules: ChangeRules) -> Path:
    """Where the table at ``path`` keeps its tombstones (type 1) or change log (type 2)."""
    return path / (TOMBSTONES if rules.scd_type == 1 else CHANGE_LOG)


def create_tables(
    spark: SparkSession,
    path: Path,
    events: DataFrame,
    rules: ChangeRules,
    partition_by: Sequence[str] = (),
) -> None:
    """The table and its state table, typed from the events (a stream or a batch)."""
    typed = changes(events, rules).schema
    delta.create_table(spark, path, table_schema(typed, rules.scd_type), partition_by)
    if rules.scd_type == 1:
        state = StructType([typed[name] for name in (*rules.keys, SEQUENCE)])
    else:
        state = typed
    delta.create_table(spark, state_path(path, rules), state)


def apply_changes(
    batch: DataFrame, path: Path, rules: ChangeRules, app_id: str, batch_id: int, where: str
) -> None:
    """Apply the change events of micro-batch ``batch_id`` to the table at ``path``, once
    per ``(app_id, batch_id)``; a replayed batch is still read (``noop``)."""
    side = state_path(path, rules)
    done = _applied(path, app_id, batch_id), _applied(side, app_id, batch_id)
    if all(done):
        batch.write.format("noop").mode("overwrite").save()
        return
    session = batch.sparkSession
    given = one_per_sequence(changes(batch, rules), rules).persist()
    try:
        _check_sequences(given, rules, where)
        if rules.scd_type == 1:
            latest = latest_changes(given, rules)
            if not done[0]:
                with delta.idempotent(session, app_id, batch_id):
                    _merge_latest(session, path, side, latest, rules)
            if not done[1]:
                with delta.idempotent(session, app_id, batch_id):
                    _merge_tombstones(session, side, latest, rules)
        else:
            if not done[0]:
                with delta.idempotent(session, app_id, batch_id):
                    _merge_history(session, path, side, given, rules)
            if not done[1]:
                with delta.idempotent(session, app_id, batch_id):
                    _merge_change_log(session, side, given, rules)
    finally:
        given.unpersist()


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
    version = delta.applied_version(path, app_id)
    return version is not None and batch_id <= version


def _check_sequences(given: DataFrame, rules: ChangeRules, where: str) -> None:
    """A change without a sequence cannot be ordered: fail, showing one."""
    unordered = given.where(F.col(SEQUENCE).isNull()).drop(SEQUENCE, DELETED).limit(1).collect()
    if unordered:
        raise UserError(
            f"{where}: a change event has no sequence (cdc.sequence_by "
            f"{rules.sequence_by!r} is null), so it cannot be ordered: {unordered[0].asDict()}"
        )


def _on_keys(rules: ChangeRules, *more: str) -> Column:
    condition = F.lit(True)
    for name in (*rules.keys, *more):
        condition = condition & F.col(f"t.{_q(name)}").eqNullSafe(F.col(f"s.{_q(name)}"))
    return condition


def _source(columns: Sequence[str]) -> dict[str, str | Column]:
    return {_q(c): F.col(f"s.{_q(c)}") for c in columns}


def _merge_latest(
    spark: SparkSession, path: Path, side: Path, latest: DataFrame, rules: ChangeRules
) -> None:
    """Type 1: a key's row becomes its latest change when that change comes after both
    the row (by sequence; at an equal one, a delete, or an update whose JSON sorts last)
    and the key's tombstone."""
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
    (
        DeltaTable.forPath(spark, str(path))
        .alias("t")
        .merge(source.alias("s"), _on_keys(rules))
        .whenMatchedDelete(F.col(f"s.{DELETED}") & after_row)
        .whenMatchedUpdate(update & after_row & after_tombstone, values)
        .whenNotMatchedInsert(update & after_tombstone, values)
        .execute()
    )


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


def _merge_history(
    spark: SparkSession, path: Path, side: Path, given: DataFrame, rules: ChangeRules
) -> None:
    """Type 2: the versions of every key the batch touches, recomputed from all its
    changes (the change log's and the batch's), replace that key's rows."""
    from delta.tables import DeltaTable

    touched = given.select(*rules.keys).distinct()
    logged = _of_keys(spark.read.format("delta").load(str(side)), touched, rules)
    everything = one_per_sequence(logged.unionByName(given), rules)
    versions = history(everything, rules)
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
        DeltaTable.forPath(spark, str(path))
        .alias("t")
        .merge(source.alias("s"), _on_keys(rules, START_AT))
        .whenMatchedDelete(~upsert)
        .whenMatchedUpdate(upsert, values)
        .whenNotMatchedInsert(upsert, values)
        .execute()
    )


def _merge_change_log(
    spark: SparkSession, side: Path, given: DataFrame, rules: ChangeRules
) -> None:
    """Type 2: the batch's changes join the log, one per key and sequence (the same
    choice between two as :func:`streamsmith.transforms.cdc.one_per_sequence`)."""
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
