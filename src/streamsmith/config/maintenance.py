"""The spec's lake upkeep: ``maintenance`` (compaction, vacuum, expiry of rejected
rows) and ``materialized_views``."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from streamsmith.config.base import Cron, StrictModel
from streamsmith.config.durations import check_schedule, parse_duration

AFTER_RUN = "after_run"


def _maintenance_time(text: str) -> str:
    if text == AFTER_RUN:
        return text
    try:
        return check_schedule(text)
    except ValueError as exc:
        raise ValueError(f"{exc}; or after_run: after each catch-up run of the flow") from None


def _whole_hours(text: str) -> str:
    seconds = parse_duration(text)
    if seconds < 3600 or seconds % 3600:
        raise ValueError(
            f"{text!r}: give whole hours, at least 1 hour (e.g. 36h, 7 days): "
            "maintenance keeps files and rows by the hour"
        )
    return text


MaintenanceTime = Annotated[str, AfterValidator(_maintenance_time)]


class MaintenanceSpec(StrictModel):
    """When a flow's Delta tables are compacted (``OPTIMIZE``) and vacuumed (``VACUUM``),
    and how long their old versions stay readable (``retain``).

    ``optimize`` and ``vacuum`` each take a cron expression (UTC), run by the process that
    runs the pipeline's schedules or its always-on flows, or ``after_run``: after each
    catch-up run of the flow. ``retain`` is the tables' time-travel window: VACUUM deletes
    only files no version committed within it uses, twice it is written into each table
    as ``delta.deletedFileRetentionDuration`` (so Delta refuses any shorter VACUUM by
    Spark or another delta-rs client, and keeps the records of removed files that vacuum
    finds them by: vacuum at least once every ``retain``), and it must cover the time
    between the runs of a scheduled flow reading the table as a stream. A stream further
    behind than ``retain`` still keeps its files: VACUUM keeps every file of the versions
    its checkpoint has not read.
    See docs/how-to/query-the-lake.md.
    """

    optimize: MaintenanceTime | None = Field(
        default=None, description='cron (UTC, e.g. "0 3 * * *") or after_run: compact small files'
    )
    vacuum: MaintenanceTime | None = Field(
        default=None,
        description="cron (UTC) or after_run: delete files no version within retain uses",
    )
    retain: Annotated[str, AfterValidator(_whole_hours)] = Field(
        default="7 days",
        description="the time-travel window, in whole hours (at least 1 hour): versions "
        "committed within it stay readable",
    )
    target_file_mb: int | None = Field(
        default=None,
        gt=0,
        description="the size OPTIMIZE aims for per file (default: the table's "
        "delta.targetFileSize, else 100 MB)",
    )
    log_retain: Annotated[str, AfterValidator(_whole_hours)] | None = Field(
        default=None,
        description="how long each table's Delta log keeps a version's commit (whole "
        "hours, at least retain), written into the table as delta.logRetentionDuration at "
        "each vacuum; Delta deletes older commits at its checkpoints; default: Delta's 30 "
        "days (a stream stopped for longer can no longer resume on the table)",
    )
    keep_rejected: Annotated[str, AfterValidator(_whole_hours)] | None = Field(
        default=None,
        description="delete the quarantine's and late-events tables' rows written longer "
        "ago than this (whole hours, e.g. 90 days), a partition at a time, when vacuum "
        "runs; default: keep them",
    )

    @property
    def retain_hours(self) -> int:
        return int(parse_duration(self.retain) // 3600)

    @property
    def log_retain_hours(self) -> int | None:
        if self.log_retain is None:
            return None
        return int(parse_duration(self.log_retain) // 3600)

    @property
    def keep_rejected_hours(self) -> int | None:
        if self.keep_rejected is None:
            return None
        return int(parse_duration(self.keep_rejected) // 3600)


class MaterializedViewSpec(StrictModel):
    """A materialized view: a batch query over the pipeline's lake tables (and other
    views), kept as a Delta table of the view's name and recomputed whole at each refresh
    (one Delta version each), as Spark Declarative Pipelines' ``@materialized_view`` does.

    It refreshes after a catch-up ``run`` (once its flows are done), after each scheduled
    run of a flow whose table it reads, and on its own ``schedule``. See
    docs/how-to/multi-hop.md.
    """

    sql: str = Field(min_length=1, description="SELECT ... FROM <table> [JOIN <table> ...]")
    schedule: Cron | None = Field(
        default=None, description='cron (UTC): refresh on it too, e.g. "0 * * * *"'
    )
    partition_by: tuple[str, ...] = Field(default=(), description="the table's partition columns")
    cluster_by: tuple[str, ...] = Field(
        default=(), description="the table's liquid-clustering columns (instead of partitions)"
    )
    properties: dict[str, str] = Field(
        default={}, description="Delta table properties, e.g. delta.logRetentionDuration"
    )
    description: str = Field(default="", description="shown by dry-run")
