"""Plain console output shared by the CLI and the demos: text as written, rows as a table."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

# C0 and C1 controls, DEL, and the bidirectional overrides that reorder what a reader sees.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def say(console: Console, text: str) -> None:
    """Print plain text: no markup, highlighting or wrapping of paths and SQL."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def rows_table(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None
) -> Table:
    """Rows under their column names, nulls shown empty, the title on the left; every
    cell plain text, its control characters escaped (see :func:`printable`)."""
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(Text(printable(str(column))))
    for row in rows:
        table.add_row(*[Text("" if value is None else printable(str(value))) for value in row])
    return table


def printable(text: str) -> str:
    """``text`` with control characters written as escapes (``\\x1b``, ``\\n``), so data
    shown on a terminal cannot move the cursor, recolour it or reorder what is read.

    Cells go to Rich as :class:`~rich.text.Text`, never as markup: a value holding
    ``[link=...]`` or ``[/]`` is shown as written.
    """
    return _CONTROL.sub(lambda found: found.group().encode("unicode_escape").decode(), text)
