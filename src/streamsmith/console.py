"""Plain console output shared by the CLI and the demos: text as written, rows as a table."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table


def say(console: Console, text: str) -> None:
    """Print plain text: no markup, highlighting or wrapping of paths and SQL."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def rows_table(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None
) -> Table:
    """Rows under their column names, nulls shown empty, the title on the left."""
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*["" if value is None else str(value) for value in row])
    return table
