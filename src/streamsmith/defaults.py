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
# A Spark Declarative Pipelines project's spec, found in a folder or its parents, as
# ``spark-pipelines`` finds it (a streamsmith.yml beside it holds streamsmith's settings).
SDP_SPEC_FILES = ("spark-pipeline.yml", "spark-pipeline.yaml")
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
    :class:`streamsmith.Pipeline`, a folder holding ``streamsmith.yml`` or an SDP
    project's ``spark-pipeline.yml``; with no target the one here (an SDP project's also
    in a parent folder, as ``spark-pipelines`` looks); None when ``target`` is an app's
    name."""
    if target is None:
        found = sdp_spec_in(Path.cwd(), parents=not Path(SPEC_FILE).is_file())
        if found is not None:
            return found
        default = Path(SPEC_FILE)
        if not default.is_file():
            raise UserError(
                f"no {SPEC_FILE} here, nor a {SDP_SPEC_FILES[0]} here or above: name an app "
                "(see `streamsmith apps`) or a spec file, or create a pipeline with "
                "`streamsmith init DIR`"
            )
        return default.resolve()
    path = Path(target).expanduser()
    if path.is_dir():
        found = sdp_spec_in(path.resolve(), parents=False)
        if found is not None:
            return found
        if not (path / SPEC_FILE).is_file():
            raise UserError(f"folder {path} holds no {SPEC_FILE} (nor {SDP_SPEC_FILES[0]})")
        return (path / SPEC_FILE).resolve()
    if path.suffix in (".yml", ".yaml", ".py"):
        if not path.is_file():
            raise UserError(
                f"{'pipeline' if path.suffix == '.py' else 'spec'} file {path} does not exist"
            )
        return path.resolve()
    return None


def sdp_spec_in(folder: Path, *, parents: bool) -> Path | None:
    """The ``spark-pipeline.yml`` (or ``.yaml``) in ``folder`` (or, with ``parents``, the
    nearest folder above holding one); two in one folder is an error, as in SDP."""
    for place in (folder, *folder.parents) if parents else (folder,):
        found = [place / name for name in SDP_SPEC_FILES if (place / name).is_file()]
        if len(found) > 1:
            raise UserError(f"folder {place} holds both {' and '.join(SDP_SPEC_FILES)}: keep one")
        if found:
            return found[0].resolve()
    return None


def spec_here() -> Path | None:
    """The spec a command naming none reads, without raising: what :func:`find_spec`
    finds with no target, or None."""
    try:
        return find_spec(None)
    except UserError:
        return None
