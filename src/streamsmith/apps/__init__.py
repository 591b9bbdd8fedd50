"""The reference applications, one module each, looked up by name."""

from __future__ import annotations

from streamsmith.apps import actions, activity, cloudtrail, logs, nest, secops, signals, ysb
from streamsmith.errors import UserError
from streamsmith.runtime.app import App

APPS: dict[str, App] = {
    app.name: app
    for app in (
        cloudtrail.APP,
        nest.APP,
        actions.APP,
        signals.APP,
        activity.APP,
        logs.APP,
        secops.APP,
        ysb.APP,
    )
}


def get_app(name: str) -> App:
    """The app called ``name``, or a UserError listing the known apps."""
    try:
        return APPS[name]
    except KeyError:
        known = ", ".join(sorted(APPS))
        raise UserError(f"unknown app {name!r}: choose one of {known}") from None
