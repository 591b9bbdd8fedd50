"""Delta Lake tables of the lake: exactly-once appends, idempotent merges and overwrites.

A Delta table is a folder with a transaction log (``_delta_log``): a reader sees exactly
the committed versions, so the files of a batch killed before its commit are never read,
and every version stays readable (time travel) until ``VACUUM`` removes its files.

A streaming query writes each micro-batch from ``foreachBatch`` (an append, the ``MERGE``
of an update-mode batch, the overwrite of a complete-mode one), and each commit carries
streamsmith's mark, the query and the batch id in its ``userMetadata``
(``io.delta_marks``: why not Delta's ``txnAppId``, and why not Delta's streaming sink,
which reads it every batch). A batch
that is replayed after a crash between the Delta commit and the checkpoint's commit finds
its mark, writes nothing, and still reads its input (a ``noop`` write), as a replayed
batch must for Spark to report it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, DataFrameWriter, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from streamsmith.errors import UserError
from streamsmith.io.delta_marks import USER_METADATA_CONF, applied_version, batch_mark
from streamsmith.io.lake_paths import is_delta, is_table
from streamsmith.object_store import remove_tree, storage_options
from streamsmith.spark.conf import session_conf


@dataclass(frozen=True)
class TableSettings:
    """What a table declares beyond its columns and partitions: Delta table properties
    and liquid-clustering columns (Spark Declarative Pipelines' ``table_properties`` and
    ``cluster_by``). Declared, they hold on every run: a changed value is set on the
    existing table (a property no longer declared is left as it is)."""

    properties: Mapping[str, str] = field(default_factory=dict)
    cluster_by: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.properties or self.cluster_by)


NO_SETTINGS = TableSettings()


def create_table(
    spark: SparkSession,
    path: Path,
    schema: StructType,
    partition_by: Sequence[str] = (),
    settings: TableSettings = NO_SETTINGS,
) -> None:
    """Create an empty Delta table at ``path`` with ``schema`` unless one exists, so the
    table can be queried (and merged into) before its first batch; an existing one gets
    the ``settings`` it lacks. A Parquet table already there (the lake's format before
    Delta) is refused, not mixed in.

    A table without settings is created by delta-rs, in the driver's Python: the same
    log entries (Spark's schema JSON is Delta's), a few milliseconds against Delta's
    0.2-0.5 s of JVM work per table (``benchmarks/delta_create.py``). Properties and
    clustering go through Delta's own builder, which knows what each one implies."""
    refuse_parquet(path)
    if is_delta(path):
        if settings:
            apply_settings(spark, path, settings)
        return
    if not settings:
        from deltalake import DeltaTable as RustTable
        from deltalake import Schema

        RustTable.create(
            str(path), Schema.from_json(schema.json()), partition_by=list(partition_by) or None,
            mode="ignore", storage_options=storage_options(path),
        )  # fmt: skip
        write_first_checksum(path)
        return
    from delta.tables import DeltaTable

    builder = DeltaTable.createIfNotExists(spark).location(str(path)).addColumns(schema)
    if partition_by:
        builder = builder.partitionedBy(*partition_by)
    if settings.cluster_by:
        builder = builder.clusterBy(*settings.cluster_by)
    for key, value in settings.properties.items():
        builder = builder.property(key, value)
    builder.execute()


def write_first_checksum(path: Path) -> None:
    """Write the checksum file of version 0 of a table delta-rs created, which it does not
    write: without it, Delta Lake rebuilds the table's state with Spark jobs on its first
    write (five more jobs; each later version's checksum is made from the one before):
    a table's first two appends 0.67-0.95 s warm against 0.29-0.31 s with it
    (``benchmarks/delta_create.py``). An empty table's checksum is its metadata and
    protocol and nothing else; left alone where Delta or another writer made the
    version."""
    log = path / "_delta_log"
    checksum = log / f"{0:020d}.crc"
    if checksum.exists():
        return
    actions = [json.loads(line) for line in (log / f"{0:020d}.json").read_text().splitlines()]
    found = {key: value for action in actions for key, value in action.items()}
    if not str(found.get("commitInfo", {}).get("engineInfo", "")).startswith("delta-rs"):
        return
    metadata = {key: value for key, value in found["metaData"].items() if value is not None}
    state = {
        "tableSizeBytes": 0, "numFiles": 0, "numMetadata": 1, "numProtocol": 1,
        "setTransactions": [], "domainMetadata": [], "metadata": metadata,
        "protocol": found["protocol"], "allFiles": [],
    }  # fmt: skip
    staged = log / f".{checksum.name}.{uuid.uuid4().hex}.tmp"
    staged.write_text(json.dumps(state, separators=(",", ":")))
    staged.replace(checksum)


def apply_settings(spark: SparkSession, path: Path, settings: TableSettings) -> None:
    """Set on the table at ``path`` the declared properties it lacks or holds another
    value of, and its clustering columns when they differ (one commit each, only on a
    change: the properties are read from the log without a JVM)."""
    from deltalake import DeltaTable

    table = f"delta.{_quoted(str(path))}"
    held = DeltaTable(str(path), storage_options=storage_options(path)).metadata().configuration
    changed = {k: v for k, v in settings.properties.items() if held.get(k) != v}
    if changed:
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ({_pairs(changed)})")
    if settings.cluster_by:
        (detail,) = spark.sql(f"DESCRIBE DETAIL {table}").select("clusteringColumns").collect()
        if tuple(detail[0] or ()) != settings.cluster_by:
            spark.sql(f"ALTER TABLE {table} CLUSTER BY ({_names(settings.cluster_by)})")


def already_applied(
    batch: DataFrame, path: Path, app_id: str, batch_id: int, legacy: str | None = None
) -> bool:
    """Whether micro-batch ``batch_id`` of ``app_id`` (or of ``legacy``: see
    ``io.delta_marks.applied_version``) is already in the table; if so the batch is read
    anyway (``noop``), so its metrics are those of a batch that ran."""
    version = applied_version(path, app_id, legacy)
    if version is None or batch_id > version:
        return False
    batch.write.format("noop").mode("overwrite").save()
    return True


def merge_batch(
    batch: DataFrame, path: Path, keys: Sequence[str], app_id: str, batch_id: int
) -> None:
    """Upsert ``batch`` into the table by ``keys`` (one row per key in the batch, as an
    update-mode micro-batch has), once per ``(app_id, batch_id)``."""
    if already_applied(batch, path, app_id, batch_id):
        return
    from delta.tables import DeltaTable

    session = batch.sparkSession  # the query's own session: its conf is the query's alone
    condition = " AND ".join(f"t.{_quoted(k)} <=> s.{_quoted(k)}" for k in keys)
    with marked(session, app_id, batch_id):
        (
            DeltaTable.forPath(session, str(path))
            .alias("t")
            .merge(batch.alias("s"), condition)
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )


def overwrite_batch(
    batch: DataFrame, path: Path, app_id: str, batch_id: int, partition_by: Sequence[str] = ()
) -> None:
    """Replace the table's content with ``batch`` (complete mode), once per batch."""
    if already_applied(batch, path, app_id, batch_id):
        return
    _save(batch.write.format("delta").mode("overwrite"), path, app_id, batch_id, partition_by)


@contextmanager
def marked(session: SparkSession, app_id: str, batch_id: int) -> Iterator[None]:
    """The commits of the Delta statements in the block (a ``MERGE``) carry the mark of
    micro-batch ``batch_id`` of ``app_id`` (``io.delta_marks``); a ``userMetadata`` the
    session had is restored after."""
    with session_conf(session, {USER_METADATA_CONF: batch_mark(app_id, batch_id)}):
        yield


def append_batch(
    batch: DataFrame,
    path: Path,
    app_id: str,
    batch_id: int,
    partition_by: Sequence[str] = (),
    *,
    durable: bool = False,
    legacy: str | None = None,
) -> int:
    """Append ``batch`` to the table once per ``(app_id, batch_id)``; returns its rows
    (those of the first attempt when the batch is a replay, which writes nothing).

    For a flow's appends, its quarantine and late events: the mark goes into the
    append's commit, as for :func:`merge_batch`. ``durable`` also records it with
    Delta's ``txnAppId``/``txnVersion``, which outlive the log's cleanup (a ``once``
    flow's append, checked on every run for as long as it exists). ``legacy``: see
    :func:`already_applied`.
    """
    counted = Observation(f"rows-{app_id}-{batch_id}")
    batch = batch.observe(counted, F.count(F.lit(1)).alias("rows"))
    if not already_applied(batch, path, app_id, batch_id, legacy):
        writer = batch.write.format("delta").mode("append")
        writer = writer.option("mergeSchema", "true")  # new columns of an evolved input
        if durable:
            writer = writer.option("txnAppId", app_id).option("txnVersion", str(batch_id))
        _save(writer, path, app_id, batch_id, partition_by)
    return int(counted.get.get("rows", 0))


def _save(
    writer: DataFrameWriter, path: Path, app_id: str, batch_id: int, partition_by: Sequence[str]
) -> None:
    """Commit ``writer``'s write to ``path`` with the mark of ``(app_id, batch_id)``."""
    writer = writer.option("userMetadata", batch_mark(app_id, batch_id))
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.save(str(path))


def overwrite_table(
    frame: DataFrame,
    path: Path,
    partition_by: Sequence[str] = (),
    *,
    append: bool = False,
    settings: TableSettings = NO_SETTINGS,
) -> None:
    """Replace the whole table with ``frame`` (a backfill, a materialized view's
    refresh), its schema included; a Parquet folder an earlier version left there is
    removed first. With ``append``, add ``frame`` to the table instead (a further flow's
    backfill into it). A table with ``settings`` is replaced by one statement that
    declares them: Delta's overwrite keeps the properties but drops the clustering."""
    if is_table(path) and not is_delta(path):
        remove_tree(path)
    if settings and not append:
        _replace_with(frame, path, partition_by, settings)
        return
    writer = frame.write.format("delta").mode("append" if append else "overwrite")
    if not append:
        writer = writer.option("overwriteSchema", "true")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.save(str(path))


def refuse_parquet(path: Path) -> None:
    """Refuse to write Delta over a Parquet table (written before Delta was the default)."""
    if is_table(path) and not is_delta(path):
        raise UserError(
            f"table {path.name} at {path} is a Parquet table (Parquet was the default "
            "sink format before Delta): convert it with `streamsmith table convert "
            f"{path.name}` (its checkpoint resumes), or set `format: parquet` on its "
            "flow's sink to keep writing Parquet"
        )


def _replace_with(
    frame: DataFrame, path: Path, partition_by: Sequence[str], settings: TableSettings
) -> None:
    """``CREATE OR REPLACE TABLE`` at ``path`` as ``frame``, with ``settings`` (one commit)."""
    view = f"_streamsmith_replace_{abs(hash((str(path), id(frame))))}"
    layout = ""
    if partition_by:
        layout += f" PARTITIONED BY ({_names(partition_by)})"
    if settings.cluster_by:
        layout += f" CLUSTER BY ({_names(settings.cluster_by)})"
    if settings.properties:
        layout += f" TBLPROPERTIES ({_pairs(settings.properties)})"
    frame.createOrReplaceTempView(view)
    try:
        frame.sparkSession.sql(
            f"CREATE OR REPLACE TABLE delta.{_quoted(str(path))} USING delta{layout} "
            f"AS SELECT * FROM {view}"
        )
    finally:
        frame.sparkSession.catalog.dropTempView(view)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _names(columns: Sequence[str]) -> str:
    """``columns`` as a SQL list of quoted names."""
    return ", ".join(map(_quoted, columns))


def _pairs(properties: Mapping[str, str]) -> str:
    """``properties`` as the inside of a ``TBLPROPERTIES (...)`` clause."""
    return ", ".join(f"{_literal(k)} = {_literal(v)}" for k, v in properties.items())


def _literal(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
