"""Classes packages register under an entry-point group (``streamsmith.sinks``,
``streamsmith.sources``): loaded on first use, checked to be what the group promises."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Set
from importlib.metadata import entry_points
from typing import TypeVar, cast

from streamsmith.errors import UserError

T = TypeVar("T")


def entry_point_objects(
    group: str,
    accepts: Callable[[object], bool],
    promise: str,
    *,
    reserved: Set[str] = frozenset(),
    names: Set[str] | None = None,
) -> Iterator[tuple[str, object]]:
    """Each entry point of ``group`` (only those in ``names``, when given) with the object
    it names, which ``accepts`` must take (``promise`` says what it should be); a name in
    ``reserved`` (a built-in's) is an error."""
    for point in entry_points(group=group):
        if names is not None and point.name not in names:
            continue
        where = f"entry point {point.name!r} of group {group} ({point.value})"
        if point.name in reserved:
            raise UserError(f"{where} may not replace the built-in {point.name!r}")
        found = point.load()
        if not accepts(found):
            raise UserError(f"{where} does not give {promise} (got {found!r})")
        yield point.name, found


def entry_point_classes(
    group: str, base: type[T], *, reserved: Set[str] = frozenset(), names: Set[str] | None = None
) -> Iterator[tuple[str, type[T]]]:
    """Each entry point of ``group`` with the class it names, a subclass of ``base``."""
    for name, found in entry_point_objects(
        group,
        lambda found: isinstance(found, type) and issubclass(found, base),
        f"a streamsmith {base.__name__}",
        reserved=reserved,
        names=names,
    ):
        yield name, cast("type[T]", found)


def entry_point_names(group: str) -> frozenset[str]:
    """The names registered under ``group``, nothing loaded."""
    return frozenset(point.name for point in entry_points(group=group))
