"""Time travel over the lake: ``t VERSION AS OF 3`` and ``t TIMESTAMP AS OF '…'``.

On Spark: the lake's tables reach Spark SQL as temporary views, which have no versions;
Delta answers time travel for a table named by its path. So each time-travelling
reference to a Delta lake table is rewritten to ``delta.`<its folder>` VERSION AS OF …``
(an alias keeps the name the rest of the query uses); one to a Parquet table is an error
that says why.

In-process (DuckDB over delta-rs): a reference becomes a view of that version's files,
chosen as Delta chooses it. A timestamp picks the newest version committed at or before
it, a commit's time being its log file's modification time made strictly increasing, as
Delta without in-commit timestamps has it (``DESCRIBE HISTORY`` shows those times). A
version or a time outside the table's history is left to Spark, which says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import sqlglot
from sqlglot import exp

from streamsmith.errors import UserError
from streamsmith.io.lake_paths import DELTA_LOG, is_delta
from streamsmith.read.errors import NotOnFastPath


@dataclass(frozen=True)
class TableVersion:
    """A time-travelling reference: ``table`` at ``VERSION`` or ``TIMESTAMP`` ``value``."""

    table: str
    kind: str  # "VERSION" or "TIMESTAMP"
    value: str

    @classmethod
    def of(cls, table: exp.Table) -> TableVersion:
        """The reference ``table`` makes (it has a version); a value other than a literal
        is left to Spark."""
        version = table.args["version"]
        literal = version.expression
        if not isinstance(literal, exp.Literal):
            raise NotOnFastPath(f"time travel to {literal.sql(dialect='spark')}")
        return cls(table.name, str(version.this).upper(), str(literal.this))

    @property
    def view(self) -> str:
        """The name of the DuckDB view holding that version."""
        return f"{self.table}@{self.kind.lower()}={self.value}"

    def resolve(self, path: Path, time_zone: str) -> int:
        """The version of the Delta table at ``path`` this reference reads."""
        times = commit_times(path)
        if self.kind == "VERSION":
            if not self.value.isdigit() or int(self.value) not in times:
                raise NotOnFastPath(f"version {self.value} is not in the table's log")
            return int(self.value)
        try:
            moment = datetime.fromisoformat(self.value)
        except ValueError:
            raise NotOnFastPath(
                f"a timestamp DuckDB does not read as Spark: {self.value}"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=ZoneInfo(time_zone))
        wanted = moment.timestamp() * 1000
        before = [version for version, millis in times.items() if millis <= wanted]
        if not before or wanted > max(times.values()):
            raise NotOnFastPath(f"{self.value} is outside the table's history")
        return max(before)


def commit_times(path: Path) -> dict[int, float]:
    """Each version's commit time in milliseconds, as Delta's history gives it: the
    modification time of its log file, raised to one past the previous where the file
    system's clock would have it go back."""
    times: dict[int, float] = {}
    last = float("-inf")
    commits = [entry for entry in (path / DELTA_LOG).glob("*.json") if entry.stem.isdigit()]
    for entry in sorted(commits, key=lambda e: int(e.stem)):
        millis = float(entry.stat().st_mtime_ns // 1_000_000)
        last = max(millis, last + 1)
        times[int(entry.stem)] = last
    return times


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
