"""Delta tables as a source: another flow's table (bronze -> silver -> gold), or a Delta
table elsewhere, read as a stream through Delta's own streaming source.

Delta's source reads the table's commits in order, committed versions only, and keeps
the last version read in the checkpoint, so a replay reads the same rows. A plain stream
takes the rows each commit appends; a commit that changes or deletes rows (a ``MERGE`` of
an update-mode flow, a complete-mode overwrite) stops it, unless ``skipChangeCommits``
says to pass over such commits. ``read_change_feed`` reads the table's change data feed
instead: every insert, update (its pre- and post-image) and delete, with
``_change_type``, ``_commit_version`` and ``_commit_timestamp``; the table must record it
(``delta.enableChangeDataFeed``), which the runtime turns on for a table of the pipeline
before the reading flow starts (:func:`record_change_feed`).

A batch read (a backfill) takes the table as it is; with ``read_change_feed`` each row is
an insert, which is what the change feed of a table rebuilt in one commit holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from streamsmith.errors import UserError
from streamsmith.io.lake import read_table
from streamsmith.io.lake_paths import is_delta
from streamsmith.io.sources.base import Source

CHANGE_FEED_PROPERTY = "delta.enableChangeDataFeed"
# The change feed's own columns, as Delta names them.
CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP = (
    "_change_type",
    "_commit_version",
    "_commit_timestamp",
)
# Delta's streaming read options (lowercase -> as Delta spells them): any other key would
# be ignored by Spark without a word, so it is an error.
_OPTIONS = {
    key.lower(): key
    for key in (
        "maxFilesPerTrigger",
        "maxBytesPerTrigger",
        "skipChangeCommits",
        "ignoreDeletes",
        "startingVersion",
        "startingTimestamp",
        "withEventTimeOrder",
        "excludeRegex",
        "schemaTrackingLocation",
    )
}
SKIP_CHANGE_COMMITS = "skipchangecommits"


class DeltaSource(Source):
    """A Delta table: ``path`` is its folder (a table of the pipeline's, or elsewhere)."""

    formats: ClassVar[tuple[str, ...]] = ("delta",)

    def check(self, name: str) -> None:
        unknown = sorted(key for key in self.spec.options if key.lower() not in _OPTIONS)
        if unknown:
            raise UserError(
                f"sources.{name}.options: Delta's streaming source has no option(s) "
                f"{', '.join(unknown)} (its options: {', '.join(_OPTIONS.values())})"
            )

    def read(self, spark: SparkSession, schema: StructType | None, *, streaming: bool) -> DataFrame:
        assert self.path is not None  # the plan resolves a table's folder
        if not streaming:
            return self._read_batch(spark, self.path)
        reader = spark.readStream.format("delta")
        for key, value in self.spec.options.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            reader = reader.option(_OPTIONS[key.lower()], text)
        if self.spec.read_change_feed:
            reader = reader.option("readChangeFeed", "true")
        return reader.load(str(self.path))

    def _read_batch(self, spark: SparkSession, path: Path) -> DataFrame:
        frame = read_table(spark, path)
        if not self.spec.read_change_feed:
            return frame
        return frame.select(
            "*",
            F.lit("insert").alias(CHANGE_TYPE),
            F.lit(None).cast("long").alias(COMMIT_VERSION),
            F.lit(None).cast("timestamp").alias(COMMIT_TIMESTAMP),
        )

    def describe(self) -> str:
        what = f"delta table {self.spec.table}" if self.spec.table else "delta table"
        how = "its change data feed" if self.spec.read_change_feed else "appended rows"
        options = ", ".join(f"{k}={v}" for k, v in sorted(self.spec.options.items()))
        return f"{what} at {self.path}, as a stream of {how}" + (f" ({options})" * bool(options))

    def identity(self) -> str:
        return f"{self.path}{' (change feed)' if self.spec.read_change_feed else ''}"

    def missing_input(self) -> str | None:
        if self.path is not None and not is_delta(self.path):
            return f"delta table {self.path}"
        return None

    @property
    def skips_change_commits(self) -> bool:
        """Whether a commit that changes rows is passed over (not a stop of the stream)."""
        options = {key.lower(): str(value).lower() for key, value in self.spec.options.items()}
        return options.get(SKIP_CHANGE_COMMITS) == "true"


def record_change_feed(spark: SparkSession, path: Path) -> bool:
    """Turn on the change data feed of the Delta table at ``path`` unless it is on; True
    when this changed the table (a new version: the feed holds changes from there on)."""
    from delta.tables import DeltaTable

    properties = DeltaTable.forPath(spark, str(path)).detail().first()
    assert properties is not None
    if str(properties["properties"].get(CHANGE_FEED_PROPERTY, "false")).lower() == "true":
        return False
    location = str(path).replace("`", "``")
    spark.sql(f"ALTER TABLE delta.`{location}` SET TBLPROPERTIES ({CHANGE_FEED_PROPERTY} = true)")
    return True


SOURCE = DeltaSource
