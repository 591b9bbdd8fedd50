"""Source kinds by format: the built-in modules of this package, and packages' own.

Each built-in module (``files``, ``kafka``, ``rate``) holds a
:class:`~streamsmith.io.sources.base.Source` subclass as ``SOURCE``, which names the
formats it serves: adding a kind of source is adding a module. A package adds its own
through the entry-point group ``streamsmith.sources`` (``format = "pkg.module:Class"``).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from pathlib import Path

from streamsmith.config import SourceSpec
from streamsmith.errors import UserError
from streamsmith.io.plugins import entry_point_classes
from streamsmith.io.sources.base import Source

ENTRY_POINT_GROUP = "streamsmith.sources"


def source_for(spec: SourceSpec, path: Path | None = None) -> Source:
    """The source that reads ``spec`` (``path``: a file source's resolved folder)."""
    return source_class(spec.format)(spec, path)


def source_class(format_: str) -> type[Source]:
    """The class serving ``format_``, or a UserError listing the known formats."""
    classes = _classes()
    if format_ not in classes:
        known = ", ".join(sorted(classes))
        raise UserError(f"unknown source format {format_!r}: choose one of {known}")
    return classes[format_]


@cache
def _classes() -> dict[str, type[Source]]:
    by_format: dict[str, type[Source]] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name == "base" or info.name.startswith("_"):
            continue
        found = getattr(importlib.import_module(f"{__name__}.{info.name}"), "SOURCE", None)
        if isinstance(found, type) and issubclass(found, Source):
            by_format.update(dict.fromkeys(found.formats, found))
    plugins = entry_point_classes(ENTRY_POINT_GROUP, Source, reserved=set(by_format))  # type: ignore[type-abstract]  # a check of subclasses
    for name, cls in plugins:
        if name not in cls.formats:
            raise UserError(f"entry point {name!r} of {ENTRY_POINT_GROUP} serves {cls.formats}")
        by_format[name] = cls
    return by_format
