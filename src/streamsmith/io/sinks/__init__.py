"""Sink formats by name: the built-in modules of this package, and packages' own sinks.

A built-in format is the module of this package named like it (``parquet``, ``kafka``,
``postgres``, ``memory``, ``webhook``, ``console``, ``foreach_batch``), holding its
:class:`~streamsmith.io.sinks.base.Sink` subclass as ``SINK``: adding a format is adding
a module. A package adds its own sinks through the entry-point group
``streamsmith.sinks`` (``name = "package.module:SinkClass"``); those may not take a
built-in's name. Modules are imported only when their format is used.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from functools import cache
from typing import Any

from pydantic import ValidationError

from streamsmith.errors import UserError
from streamsmith.io.plugins import entry_point_classes, entry_point_names
from streamsmith.io.sinks.base import Sink, SinkContext

ENTRY_POINT_GROUP = "streamsmith.sinks"
_NOT_FORMATS = frozenset({"base"})


def builtin_formats() -> tuple[str, ...]:
    """The formats this package ships, by module name (nothing imported)."""
    return tuple(
        sorted(
            info.name
            for info in pkgutil.iter_modules(__path__)
            if not info.name.startswith("_") and info.name not in _NOT_FORMATS
        )
    )


def formats() -> tuple[str, ...]:
    """Every sink format that can be named in a spec."""
    return (*builtin_formats(), *sorted(_plugin_names()))


def build_sink(format_: str, settings: Mapping[str, Any], context: SinkContext) -> Sink:
    """The sink of ``format_`` with its options validated from the spec's keys.

    A key the format does not have is ignored when it is empty or was set below the
    layer that chose the format (``--set flows.f.sink.format=console`` over a default
    spec's parquet ``table``); any other such key is an error naming the formats it
    belongs to. Errors name the key and its origin.
    """
    where = context.key
    try:
        cls = sink_class(format_)
    except UserError as exc:
        at = (*where, "format")
        origin = context.spec.origin_of(at)
        raise UserError(f"invalid value for {'.'.join(at)!r} in {origin}: {exc}") from None
    fields = cls.Options.model_fields
    chosen = context.spec.layer_of((*where, "format"))
    kept = {
        key: value
        for key, value in settings.items()
        if key in fields
        or (value not in (None, "", [], {}, ()) and context.spec.layer_of((*where, key)) >= chosen)
    }
    try:
        options = cls.Options.model_validate(kept)
    except ValidationError as exc:
        foreign = [e["loc"][0] for e in exc.errors() if e["type"] == "extra_forbidden"]
        if not foreign or len(foreign) < len(exc.errors()):
            raise UserError(context.spec.describe_error(exc, where)) from None
        raise UserError(
            "; ".join(_foreign_key(str(key), format_, where, context) for key in foreign)
        ) from None
    return cls(options, context)


def _foreign_key(key: str, format_: str, where: tuple[str, ...], context: SinkContext) -> str:
    owners = [name for name in builtin_formats() if key in sink_class(name).Options.model_fields]
    dotted = ".".join((*where, key))
    origin = context.spec.origin_of((*where, key))
    if owners:
        return (
            f"invalid key {dotted!r} in {origin}: {key} is for {' and '.join(owners)} sinks, "
            f"not {format_}"
        )
    fields = ", ".join(sink_class(format_).Options.model_fields) or "none"
    return (
        f"unknown key {dotted!r} in {origin}: a {format_} sink has no key {key!r} "
        f"(its keys: {fields}); check its spelling"
    )


def sink_class(name: str) -> type[Sink]:
    """The sink class of format ``name``, or a UserError listing the known formats."""
    return _load(name)


@cache
def _load(name: str) -> type[Sink]:
    if name in builtin_formats():
        found = getattr(importlib.import_module(f"{__name__}.{name}"), "SINK", None)
        where = f"module {__name__}.{name}"
        if not (isinstance(found, type) and issubclass(found, Sink)):
            raise UserError(f"{where} does not give a streamsmith Sink class (got {found!r})")
    elif name in _plugin_names():
        builtins = set(builtin_formats())
        # Sink is abstract: the check is for subclasses of it.
        loaded = entry_point_classes(ENTRY_POINT_GROUP, Sink, reserved=builtins, names={name})  # type: ignore[type-abstract]
        ((_, found),) = loaded
        where = f"entry point {name!r} of group {ENTRY_POINT_GROUP}"
    else:
        raise UserError(f"unknown sink format {name!r}: choose one of {', '.join(formats())}")
    if found.format != name:
        raise UserError(f"{where} gives a sink of format {found.format!r}, not {name!r}")
    return found


@cache
def _plugin_names() -> frozenset[str]:
    names = entry_point_names(ENTRY_POINT_GROUP)
    clashes = sorted(names & set(builtin_formats()))
    if clashes:
        raise UserError(
            f"entry points of group {ENTRY_POINT_GROUP} may not replace built-in sinks: "
            f"{', '.join(clashes)}"
        )
    return names
