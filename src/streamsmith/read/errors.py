"""Why the fast path hands a query to Spark."""

from __future__ import annotations


class NotOnFastPath(Exception):
    """The fast path cannot give Spark's answer to this query; the message says why in
    one line (``streamsmith query`` prints it and asks Spark)."""


def first_line(exc: Exception) -> str:
    """The first non-blank line of an engine's error message (they run to many lines)."""
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), repr(exc))
