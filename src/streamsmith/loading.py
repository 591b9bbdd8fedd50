"""Loading users' code named in a spec as ``module:attribute`` (as bytewax and uvicorn do).

Errors name the spec key that holds the reference and say what to fix, so a typo fails
before Spark starts.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from streamsmith.errors import UserError


def load_callable(
    reference: str,
    where: str,
    *,
    search: Sequence[Path] = (),
    arguments: tuple[Any, ...] = (),
    keywords: dict[str, Any] | None = None,
) -> Callable[..., Any]:
    """The callable ``reference`` (``package.module:function``) names, checked to accept
    ``arguments`` and ``keywords``; ``search`` folders are tried for the module first
    (a pipeline's own folder). ``where`` names the spec key, for errors."""
    module_name, sep, attribute = reference.partition(":")
    if not sep or not module_name or not attribute:
        raise UserError(f"{where}: {reference!r} must look like package.module:function")
    module = load_module(module_name, where, search=search)
    found: Any = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise UserError(f"{where}: module {module_name!r} has no {attribute!r}")
        found = getattr(found, part)
    if not callable(found):
        raise UserError(f"{where}: {reference!r} is a {type(found).__name__}, not a function")
    try:
        inspect.signature(found).bind(*arguments, **(keywords or {}))
    except TypeError as exc:
        raise UserError(f"{where}: {reference!r} cannot be called that way: {exc}") from None
    except ValueError:  # a builtin without a signature: trust it
        pass
    return found  # type: ignore[no-any-return]


def load_module(module_name: str, where: str, *, search: Sequence[Path] = ()) -> ModuleType:
    """The module ``module_name``, ``search`` folders tried first; a missing module is a
    UserError naming ``where`` and the places looked in."""
    for folder in reversed(search):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise UserError(
                f"{where}: no module {module_name!r} (looked in {_places(search)}); check "
                "the name or install the package"
            ) from None
        raise


def _places(search: Sequence[Path]) -> str:
    return ", ".join([*(str(folder) for folder in search), "the installed packages"])
