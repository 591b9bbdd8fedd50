"""Where a spec and its data are found, and the defaults a spec starts from.

Kept apart from :mod:`streamsmith.config` (whose models need pydantic and YAML) so that
a command which needs only these, such as ``streamsmith query`` with no spec, starts
without building the spec's models.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from streamsmith.errors import UserError
from streamsmith.object_store import is_object_url, object_root

DEFAULT_STORAGE_ROOT = "./streamsmith-data"
STORAGE_ROOT_ENV = "STREAMSMITH_ROOT"
SPEC_FILE = "streamsmith.yml"  # a pipeline of your own: its spec, found in its folder
# The session time zone streamsmith gives Spark unless the spec's spark.conf sets one
# (dates derived from event times must not depend on the host); the DuckDB read side
# uses the same.
SESSION_TIME_ZONE = "UTC"


def absolute_root(storage_root: str, conf: Mapping[str, object] | None = None) -> Path:
    """A spec's ``storage_root`` as an absolute path (``~`` expanded), or a root on S3
    (``s3a://bucket/prefix``) whose settings ``conf`` (the spec's ``spark.conf``) and the
    environment give (:mod:`streamsmith.object_store`)."""
    if is_object_url(storage_root):
        return object_root(storage_root, conf)
    return Path(storage_root).expanduser().resolve()


def root_in(folder: Path, storage_root: str) -> str:
    """A ``storage_root`` written in a file of ``folder``: a relative one is taken from
    the folder; an absolute path or an ``s3a://`` URL is kept."""
    if is_object_url(storage_root) or Path(storage_root).expanduser().is_absolute():
        return storage_root
    return str(folder / storage_root)


def default_root(given: str | None) -> Path:
    """The storage root a spec without ``storage_root`` of its own has: ``given``
    (``--root``), else ``$STREAMSMITH_ROOT``, else the default."""
    if given is None:
        given = os.environ.get(STORAGE_ROOT_ENV) or DEFAULT_STORAGE_ROOT
    return absolute_root(given)


def find_spec(target: str | None) -> Path | None:
    """The spec file ``target`` names: a YAML file, a Python file declaring a
    :class:`streamsmith.Pipeline`, a folder holding ``streamsmith.yml``, or with no target
    ``./streamsmith.yml``; None when ``target`` is an app's name."""
    if target is None:
        default = Path(SPEC_FILE)
        if not default.is_file():
            raise UserError(
                f"no {SPEC_FILE} here: name an app (see `streamsmith apps`) or a spec file, "
                "or create a pipeline with `streamsmith init DIR`"
            )
        return default.resolve()
    path = Path(target).expanduser()
    if path.is_dir():
        if not (path / SPEC_FILE).is_file():
            raise UserError(f"folder {path} holds no {SPEC_FILE}")
        return (path / SPEC_FILE).resolve()
    if path.suffix in (".yml", ".yaml", ".py"):
        if not path.is_file():
            raise UserError(
                f"{'pipeline' if path.suffix == '.py' else 'spec'} file {path} does not exist"
            )
        return path.resolve()
    return None
