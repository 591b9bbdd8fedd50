"""Time travel over the lake: ``t VERSION AS OF 3`` and ``t TIMESTAMP AS OF '…'``.

The lake's tables reach Spark SQL as temporary views, which have no versions; Delta
answers time travel for a table named by its path. So each time-travelling reference to
a Delta lake table is rewritten to ``delta.`<its folder>` VERSION AS OF …`` (an alias
keeps the name the rest of the query uses); one to a Parquet table is an error that says
why.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import sqlglot
from sqlglot import exp

from streamsmith.errors import UserError
from streamsmith.io.lake_paths import is_delta


def travels_in_time(sql: str) -> bool:
    """Whether ``sql`` has a ``VERSION AS OF`` or ``TIMESTAMP AS OF`` (cheap text test)."""
    upper = sql.upper()
    return " AS OF " in upper and ("VERSION" in upper or "TIMESTAMP" in upper)


def spark_time_travel(sql: str, tables: Mapping[str, Path]) -> str:
    """``sql`` with each time-travelling lake table read by path (see the module);
    ``tables``: the lake's tables by view name."""
    if not travels_in_time(sql):
        return sql
    by_name = {name.lower(): path for name, path in tables.items()}
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except sqlglot.errors.ParseError:
        return sql  # Spark's own parser says what is wrong
    for table in tree.find_all(exp.Table):
        if table.args.get("version") is None or table.db:
            continue
        path = by_name.get(table.name.lower())
        if path is None:
            continue  # not a lake table: Spark reports it
        if not is_delta(path):
            raise UserError(
                f"table {table.name} is a Parquet table, which keeps no versions: time travel "
                "needs a Delta table (sink format: delta)"
            )
        if table.alias_or_name == table.name and not table.alias:
            table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
        table.set("this", exp.to_identifier(str(path), quoted=True))
        table.set("db", exp.to_identifier("delta"))
    return tree.sql(dialect="spark")
