"""The reference applications, one module each, and the pipelines packages expose.

A package exposes a pipeline of its own (a :class:`streamsmith.Pipeline`) through the
entry-point group ``streamsmith.pipelines``; ``streamsmith apps`` lists it beside the
reference apps and every command runs it by name::

    [project.entry-points."streamsmith.pipelines"]
    orders = "orders_pipeline:pipeline"
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import import_module
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from streamsmith.errors import UserError
from streamsmith.io.plugins import entry_point_objects

if TYPE_CHECKING:
    from streamsmith.runtime.app import App

ENTRY_POINT_GROUP = "streamsmith.pipelines"

# The reference apps, each the module of its name, and what `streamsmith apps` says of
# it: listing them imports none (no PySpark), and using one imports only its own module.
# tests/unit/test_pipeline_specs.py checks each module's Pipeline says the same.
REFERENCE_APPS = {
    "cloudtrail": "CloudTrail log files to a date-partitioned Delta table",
    "nest": "Nest camera snapshots from Kafka: archive and hourly sightings per zip code",
    "actions": "phone open/close actions counted per hour, exactly once into PostgreSQL",
    "signals": "IoT signals: running averages per device and sliding-window statistics",
    "activity": "user activity deduplicated on (User, event_time) and counted per user",
    "logs": "collector envelopes deduplicated and structured (JSON or log4j) by date",
    "secops": "security logs structured, attributed to devices and owners, and alerted on",
    "ysb": "Yahoo Streaming Benchmark: views per campaign in 10-second windows",
}


def __getattr__(name: str) -> Any:
    """``APPS``: every reference app by name, imported on first use."""
    if name == "APPS":
        return {app: reference_app(app) for app in REFERENCE_APPS}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def reference_app(name: str) -> App:
    """The reference app ``name`` (a key of :data:`REFERENCE_APPS`), from its module."""
    app: App = import_module(f"{__name__}.{name}").pipeline.app
    return app


def get_app(name: str) -> App:
    """The app called ``name`` (a reference app, or a pipeline a package exposes), or a
    UserError listing the known ones."""
    if name in REFERENCE_APPS:
        return reference_app(name)
    for found in installed_pipelines(names={name}):
        return found
    known = ", ".join(
        sorted({*REFERENCE_APPS, *(p.name for p in entry_points(group=ENTRY_POINT_GROUP))})
    )
    raise UserError(f"unknown app {name!r}: choose one of {known}, or name a spec file")


def installed_pipelines(names: set[str] | None = None) -> Iterator[App]:
    """The pipelines installed packages expose (only those in ``names``, when given),
    each checked to be a :class:`~streamsmith.Pipeline` of the entry point's name."""
    from streamsmith.api import Pipeline

    for name, found in entry_point_objects(
        ENTRY_POINT_GROUP,
        lambda found: isinstance(found, Pipeline),
        "a streamsmith.Pipeline",
        reserved=set(REFERENCE_APPS),
        names=names,
    ):
        assert isinstance(found, Pipeline)
        if found.name != name:
            raise UserError(
                f"entry point {name!r} of group {ENTRY_POINT_GROUP} names pipeline "
                f"{found.name!r}: name the entry point so"
            )
        yield found.app
