"""Where each key of a merged spec came from (an app's defaults, a file, ``--set``), so a
validation error names the file or ``--set`` to fix."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError


def describe_validation_error(
    exc: ValidationError,
    origins: Sequence[tuple[str, dict[str, Any]]],
    app: str,
    at: tuple[str, ...] = (),
) -> str:
    """One line per problem: where it is, what is wrong, and where the key came from."""
    lines = []
    for error in exc.errors():
        loc = (*at, *(str(part) for part in error["loc"]))
        dotted = ".".join(loc) if loc else "(top level)"
        origin = origin_of(loc, origins) or f"the default spec of app {app!r}"
        if error["type"] == "extra_forbidden":
            parent = ".".join(loc[:-1]) or "the top level"
            lines.append(
                f"unknown key {dotted!r} in {origin}: {parent} has no key {loc[-1]!r}; "
                "check its spelling (see `streamsmith dry-run` for the full spec)"
            )
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
            lines.append(f"invalid value for {dotted!r} in {origin}: {message}")
    return "; ".join(lines)


def origin_of(loc: Sequence[str], origins: Sequence[tuple[str, dict[str, Any]]]) -> str | None:
    """The last layer (file or --set) that mentions the key path, if any."""
    index = layer_of(loc, origins)
    return origins[index][0] if index >= 0 else None


def layer_of(loc: Sequence[str], origins: Sequence[tuple[str, dict[str, Any]]]) -> int:
    for index in range(len(origins) - 1, -1, -1):
        layer = origins[index][1]
        node: Any = layer
        found = bool(loc)
        for part in loc:
            if isinstance(node, dict) and part in node:
                node = node[part]
            else:
                found = False
                break
        if found:
            return index
    return -1
