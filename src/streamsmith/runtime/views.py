"""Materialized views: a batch query over the pipeline's lake tables, kept as a Delta
table and recomputed whole at each refresh (``materialized_views`` in the spec).

A refresh reads the lake tables its SQL names as last committed (each a temporary view
of its name), runs the SQL, and replaces the view's table in one Delta version (an
overwrite: readers see the old result or the new one, never a mix; the history keeps
each result for time travel). It is a full recompute, never incremental.

When a view refreshes: after a catch-up ``run`` (every view, once its flows are done), after
a scheduled run of a flow whose table it reads (directly or through another view), and
on its own ``schedule``. Views refresh in dependency order, each after the views it reads.
Each refresh is an event: ``view_refreshed`` (rows, the version written, duration) or
``view_refresh_failed``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from streamsmith.errors import UserError
from streamsmith.io.delta import (
    NO_SETTINGS,
    TableSettings,
    append_batch,
    overwrite_table,
)
from streamsmith.io.delta_marks import applied_version
from streamsmith.io.lake import lake_tables, read_table
from streamsmith.monitor.recorder import first_line
from streamsmith.object_store import storage_options
from streamsmith.runtime.graph import dependency_order

log = logging.getLogger(__name__)

Record = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class ViewPlan:
    """A materialized view: its SQL, its table, what it reads and when it refreshes."""

    name: str
    sql: str
    path: Path
    reads: tuple[str, ...]  # the tables and views its SQL names
    flows: frozenset[str]  # the flows whose tables it reads, directly or through views
    schedule: str | None = None
    partition_by: tuple[str, ...] = ()
    settings: TableSettings = NO_SETTINGS  # the table's Delta properties and clustering
    description: str = ""
    # The view's query as code (``App.views``), which reads the tables itself; else ``sql``.
    query: Callable[[SparkSession], DataFrame] | None = None
    once: bool = False  # a once flow's query: appended to ``path`` in the first run only


def tables_read(sql: str, where: str) -> tuple[str, ...]:
    """The table names ``sql`` reads (its CTEs left out), in order of appearance."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except sqlglot.errors.ParseError as exc:
        raise UserError(f"{where}: the SQL does not parse: {first_line(str(exc))}") from None
    if not isinstance(tree, exp.Query):
        raise UserError(f"{where}: the SQL must be a query (SELECT ...), not a statement")
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    names = [table.name for table in tree.find_all(exp.Table) if table.name not in ctes]
    return tuple(dict.fromkeys(names))


def order_views(views: Sequence[ViewPlan]) -> list[ViewPlan]:
    """``views``, each after the views it reads (a cycle is an error naming it)."""
    by_name = {view.name: view for view in views}
    upstream = {view.name: [name for name in view.reads if name in by_name] for view in views}
    try:
        order = dependency_order(upstream)
    except UserError:
        reading = [f"{name} reads {', '.join(names)}" for name, names in upstream.items() if names]
        cycle = "; ".join(reading)
        raise UserError(f"materialized views read each other in a cycle ({cycle})") from None
    return [by_name[name] for name in order]


def with_flows(views: Sequence[ViewPlan], writers: Mapping[str, str]) -> list[ViewPlan]:
    """``views`` (in dependency order) with the flows each reads from: those writing the
    tables it names (``writers``: table -> flow), and those of the views it names."""
    done: dict[str, ViewPlan] = {}
    for view in views:
        flows = {writers[name] for name in view.reads if name in writers}
        for name in view.reads:
            if name in done:
                flows |= done[name].flows
        done[view.name] = replace(view, flows=frozenset(flows))
    return list(done.values())


def refresh(
    spark: SparkSession, root: Path, views: Iterable[ViewPlan], record: Record, trigger: str
) -> list[dict[str, Any]]:
    """Recompute ``views`` (in dependency order) into their tables, each recorded;
    ``trigger`` says why (``run``, a schedule's name, the cron). A failed view is
    recorded and the views after it still refresh; returns the events written."""
    written = []
    for view in views:
        started = time.monotonic()
        event: dict[str, Any] = {"view": view.name, "table": view.path.name, "trigger": trigger}
        once_id = f"streamsmith:once:{view.name}"
        if view.once and applied_version(view.path, once_id) is not None:
            continue  # appended by an earlier run
        try:
            if view.query is not None and view.once:
                rows = append_batch(
                    view.query(spark), view.path, once_id, 0, view.partition_by, durable=True
                )
                message = f"once flow appended {rows} rows"
                done = {"event": "once_flow_appended", "rows": rows, "message": message}
                written.append(record({**event, **done}))
                continue
            if view.query is not None:
                result = view.query(spark)
            else:
                tables = lake_tables(root)
                for name in view.reads:  # as last committed (a view refreshed just before, too)
                    if name in tables:
                        read_table(spark, tables[name]).createOrReplaceTempView(name)
                result = spark.sql(view.sql)
            overwrite_table(result, view.path, view.partition_by, settings=view.settings)
        except Exception as exc:  # recorded and returned: callers alert or fail the run
            message = f"refresh of materialized view {view.name} failed: {first_line(str(exc))}"
            log.warning(message, exc_info=True)
            written.append(record({**event, "event": "view_refresh_failed", "message": message}))
            continue
        from deltalake import DeltaTable

        (commit,) = DeltaTable(str(view.path), storage_options=storage_options(view.path)).history(
            1
        )
        rows = int((commit.get("operationMetrics") or {}).get("numOutputRows", 0))
        seconds = round(time.monotonic() - started, 3)
        done = {"event": "view_refreshed", "rows": rows, "version": commit["version"],
                "duration_s": seconds,
                "message": f"{rows} rows, version {commit['version']}"}  # fmt: skip
        written.append(record({**event, **done}))
    return written


def refresh_failures(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """The messages of the failed refreshes among ``events``."""
    return [str(e.get("message")) for e in events if e.get("event") == "view_refresh_failed"]
