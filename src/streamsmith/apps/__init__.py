"""The reference applications, one module each, and the pipelines packages expose.

A package exposes a pipeline of its own (a :class:`streamsmith.Pipeline`) through the
entry-point group ``streamsmith.pipelines``; ``streamsmith apps`` lists it beside the
reference apps and every command runs it by name::

    [project.entry-points."streamsmith.pipelines"]
    orders = "orders_pipeline:pipeline"
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import entry_points

from streamsmith.api import Pipeline
from streamsmith.apps import actions, activity, cloudtrail, logs, nest, secops, signals, ysb
from streamsmith.errors import UserError
from streamsmith.io.plugins import entry_point_objects
from streamsmith.runtime.app import App

ENTRY_POINT_GROUP = "streamsmith.pipelines"

APPS: dict[str, App] = {
    module.pipeline.name: module.pipeline.app
    for module in (cloudtrail, nest, actions, signals, activity, logs, secops, ysb)
}


def get_app(name: str) -> App:
    """The app called ``name`` (a reference app, or a pipeline a package exposes), or a
    UserError listing the known ones."""
    if name in APPS:
        return APPS[name]
    for found in installed_pipelines(names={name}):
        return found
    known = ", ".join(sorted({*APPS, *(p.name for p in entry_points(group=ENTRY_POINT_GROUP))}))
    raise UserError(f"unknown app {name!r}: choose one of {known}, or name a spec file")


def installed_pipelines(names: set[str] | None = None) -> Iterator[App]:
    """The pipelines installed packages expose (only those in ``names``, when given),
    each checked to be a :class:`~streamsmith.Pipeline` of the entry point's name."""
    for name, found in entry_point_objects(
        ENTRY_POINT_GROUP,
        lambda found: isinstance(found, Pipeline),
        "a streamsmith.Pipeline",
        reserved=set(APPS),
        names=names,
    ):
        assert isinstance(found, Pipeline)
        if found.name != name:
            raise UserError(
                f"entry point {name!r} of group {ENTRY_POINT_GROUP} names pipeline "
                f"{found.name!r}: name the entry point so"
            )
        yield found.app
