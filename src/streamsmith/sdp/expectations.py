"""Lakeflow's expectation decorators, for the functions of an SDP project's tables:
``expect``, ``expect_or_drop``, ``expect_or_fail``, ``expect_all``,
``expect_all_or_drop``, ``expect_all_or_fail``, and streamsmith's own
``expect_or_quarantine`` and ``expect_all_or_quarantine``.

They go between ``@dp.table`` and the function, as in Lakeflow, and only mark the
function; the loader makes them streamsmith's expectations of the table's flow (``warn``,
``drop``, ``fail``, ``quarantine``: the failing rows in ``<table>_quarantine`` with
``expectation <name> failed`` as the reason), counted in the event log. While
streamsmith imports a project's files, ``pyspark.pipelines`` has them too (``@dp.expect``,
as Databricks' ``pyspark.pipelines`` does), so a Lakeflow project runs unchanged; else
``from streamsmith.sdp import expectations as dp_expect``::

    @dp.table
    @dp.expect_or_drop("known_customer", "customer IS NOT NULL")
    @dp.expect_all({"sensible": "amount < 1000", "positive": "amount > 0"})
    def paid(): ...
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from streamsmith.config import ExpectAction


@dataclass(frozen=True)
class Expecting:
    """A Lakeflow expectation of a dataset (a decorator's, or SQL's ``CONSTRAINT name
    EXPECT (condition) [ON VIOLATION DROP ROW | FAIL UPDATE]``): its rule and action."""

    name: str
    sql: str
    action: ExpectAction


F = TypeVar("F", bound=Callable[..., Any])
MARK = "__streamsmith_expectations__"  # the function attribute holding its Expectings


def declared(func: Callable[..., Any]) -> tuple[Expecting, ...]:
    """The expectations the decorators put on ``func``, top to bottom."""
    found: tuple[Expecting, ...] = getattr(func, MARK, ())
    return found


def _marking(rules: Mapping[str, str], action: ExpectAction) -> Callable[[F], F]:
    def mark(func: F) -> F:
        if not callable(func):
            raise TypeError(
                "an expectation decorator goes below @dp.table (between it and the def), "
                f"not above it: it was given {func!r}"
            )
        new = tuple(Expecting(name, sql, action) for name, sql in rules.items())
        setattr(func, MARK, (*new, *declared(func)))
        return func

    return mark


def expect(name: str, constraint: str) -> Callable[[F], F]:
    """Count the rows failing ``constraint`` (a SQL boolean); keep them."""
    return _marking({name: constraint}, "warn")


def expect_or_drop(name: str, constraint: str) -> Callable[[F], F]:
    """Count and leave out the rows failing ``constraint``."""
    return _marking({name: constraint}, "drop")


def expect_or_fail(name: str, constraint: str) -> Callable[[F], F]:
    """Stop the flow at a row failing ``constraint``, naming it."""
    return _marking({name: constraint}, "fail")


def expect_or_quarantine(name: str, constraint: str) -> Callable[[F], F]:
    """streamsmith's: move the rows failing ``constraint`` to the quarantine table."""
    return _marking({name: constraint}, "quarantine")


def expect_all(expectations: Mapping[str, str]) -> Callable[[F], F]:
    """:func:`expect` for each ``name: constraint``."""
    return _marking(expectations, "warn")


def expect_all_or_drop(expectations: Mapping[str, str]) -> Callable[[F], F]:
    """:func:`expect_or_drop` for each ``name: constraint``."""
    return _marking(expectations, "drop")


def expect_all_or_fail(expectations: Mapping[str, str]) -> Callable[[F], F]:
    """:func:`expect_or_fail` for each ``name: constraint``."""
    return _marking(expectations, "fail")


def expect_all_or_quarantine(expectations: Mapping[str, str]) -> Callable[[F], F]:
    """:func:`expect_or_quarantine` for each ``name: constraint``."""
    return _marking(expectations, "quarantine")


DECORATORS = {
    f.__name__: f
    for f in (
        expect, expect_or_drop, expect_or_fail, expect_or_quarantine,
        expect_all, expect_all_or_drop, expect_all_or_fail, expect_all_or_quarantine,
    )
}  # fmt: skip
