"""Plain console output shared by the CLI and the demos: text as written, rows as a table."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

# C0 and C1 controls, DEL, and the bidirectional overrides that reorder what a reader sees.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def say(console: Console, text: str) -> None:
    """Print plain text: no markup, highlighting or wrapping of paths and SQL."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


# A column keeps its header or value whole up to this width; wider values may wrap.
_WHOLE_UP_TO = 20
_CELL_FRAME = 3  # a table cell's padding and border


def rows_table(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None
) -> Table:
    """Rows under their column names, nulls shown empty, the title on the left; every
    cell plain text, its control characters escaped (see :func:`printable`)."""
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(Text(printable(str(column))))
    for row in rows:
        table.add_row(*[Text(_cell(value)) for value in row])
    return table


def rows_view(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None, width: int
) -> RenderableType:
    """:func:`rows_table` when it fits ``width``; else one record after another, a
    line per column (``name  value``), as ``psql``'s expanded display: a table wider
    than the terminal would squeeze its columns to ellipses or to nothing."""
    shown = [[_cell(value) for value in row] for row in rows]
    names = [printable(str(column)) for column in columns]
    needed = 1 + sum(
        min(max(len(text) for text in (name, *(row[i] for row in shown))), _WHOLE_UP_TO)
        + _CELL_FRAME
        for i, name in enumerate(names)
    )
    if needed <= width:
        return rows_table(columns, rows=shown, title=title)
    records: list[RenderableType] = [Text(title)] if title else []
    name_width = max((len(name) for name in names), default=0)
    for number, row in enumerate(shown, 1):
        record = Table.grid(padding=(0, 2))
        record.add_column(width=name_width, no_wrap=True)
        record.add_column(overflow="fold")
        for name, value in zip(names, row, strict=True):
            record.add_row(Text(name), Text(value))
        records += [Text(f"-[ row {number} ]-"), record]
    return Group(*records)


def _cell(value: Any) -> str:
    return "" if value is None else printable(str(value))


def printable(text: str) -> str:
    """``text`` with control characters written as escapes (``\\x1b``, ``\\n``), so data
    shown on a terminal cannot move the cursor, recolour it or reorder what is read.

    Cells go to Rich as :class:`~rich.text.Text`, never as markup: a value holding
    ``[link=...]`` or ``[/]`` is shown as written.
    """
    return _CONTROL.sub(lambda found: found.group().encode("unicode_escape").decode(), text)
