"""An SDP project's spec, ``spark-pipeline.yml``, read as ``spark-pipelines`` reads it.

Its keys: ``name`` and ``storage`` (required), ``catalog``, ``database`` (or ``schema``),
``configuration`` (Spark settings, also the values the code reads with
``spark.conf.get``) and ``libraries`` (``- glob: {include: PATH}``, a file or a folder
ending in ``/**``). Any other key is an error, as in SDP, so the file stays one both
tools run; what streamsmith adds goes in a ``streamsmith.yml`` beside it.
"""

from __future__ import annotations

import glob
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamsmith.defaults import SDP_SPEC_FILES, SPEC_FILE, root_in
from streamsmith.errors import UserError

ALLOWED = ("name", "storage", "catalog", "database", "schema", "configuration", "libraries")


@dataclass(frozen=True)
class SdpProject:
    """A ``spark-pipeline.yml`` and where it is."""

    path: Path
    name: str
    storage: str
    catalog: str | None
    database: str | None
    configuration: Mapping[str, str]
    libraries: tuple[str, ...]

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def storage_root(self) -> str:
        """``storage`` as streamsmith's storage root: a ``file://`` URI as its path, a
        relative path from the spec's folder."""
        storage = self.storage.removeprefix("file://")
        return root_in(self.folder, storage)

    @property
    def overlay(self) -> Path | None:
        """A ``streamsmith.yml`` beside the spec: streamsmith's own settings for it."""
        beside = self.folder / SPEC_FILE
        return beside if beside.is_file() else None

    @property
    def spark_settings(self) -> dict[str, str]:
        """The ``configuration`` keys Spark itself reads (``spark.*``), set as the session
        starts; the others are values for the code (:attr:`code_settings`)."""
        return {k: v for k, v in self.configuration.items() if k.startswith("spark.")}

    @property
    def code_settings(self) -> dict[str, str]:
        """The ``configuration`` values the code reads with ``spark.conf.get``, set on
        the session once it runs (Spark ignores a non-``spark.*`` key as it starts)."""
        return {k: v for k, v in self.configuration.items() if not k.startswith("spark.")}

    @property
    def base_document(self) -> dict[str, Any]:
        """The streamsmith spec the project's keys make, before its graph adds flows."""
        return {
            "app": self.name,
            "storage_root": self.storage_root,
            "spark": {"conf": self.spark_settings},
            "trigger": "available-now",  # as `spark-pipelines run`: what is there, then stop
            "sources": {},
            "flows": {},
        }

    def files(self) -> list[Path]:
        """The library files, in the order SDP imports them: each glob in turn, the
        files it matches under the spec's folder (``__pycache__`` left out)."""
        found: list[Path] = []
        for pattern in self.libraries:
            matched = sorted(
                path.resolve()
                for path in self.folder.glob(_normalised(pattern, self.path))
                if path.is_file() and "__pycache__" not in path.parts
            )
            for path in matched:
                if path.suffix not in (".py", ".sql"):
                    raise UserError(
                        f"{self.path}: libraries: {path} is neither a .py nor a .sql file"
                    )
                if path not in found:
                    found.append(path)
        return found


def read_project(path: Path) -> SdpProject:
    """The project whose spec is ``path``; a mistake is one line naming the file."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: a pipeline spec is a mapping of keys ({', '.join(ALLOWED)})")
    unknown = [key for key in data if key not in ALLOWED]
    if unknown:
        raise UserError(
            f"{path}: unknown key {unknown[0]!r} (a spark-pipeline.yml has {', '.join(ALLOWED)}; "
            f"streamsmith's own settings go in a {SPEC_FILE} beside it)"
        )
    for key in ("name", "storage"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise UserError(f"{path}: {key} is required (a string)")
    configuration = data.get("configuration") or {}
    if not isinstance(configuration, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in configuration.items()
    ):
        raise UserError(f"{path}: configuration maps setting names to string values")
    return SdpProject(
        path=path,
        name=data["name"],
        storage=data["storage"],
        catalog=_optional(data, "catalog", path),
        database=_optional(data, "database", path) or _optional(data, "schema", path),
        configuration=dict(configuration),
        libraries=tuple(_glob(entry, index, path) for index, entry in enumerate(
            data.get("libraries") or []
        )),
    )  # fmt: skip


def _optional(data: Mapping[str, Any], key: str, path: Path) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise UserError(f"{path}: {key} must be a string")
    return value


def _glob(entry: object, index: int, path: Path) -> str:
    include = entry.get("glob", {}).get("include") if isinstance(entry, dict) else None
    if not isinstance(include, str):
        raise UserError(
            f"{path}: libraries[{index}]: write - glob: {{include: transformations/**}}"
        )
    return include


def _normalised(pattern: str, path: Path) -> str:
    """SDP's rule: a plain path, or a folder ending in ``/**`` (everything under it)."""
    if not glob.has_magic(pattern):
        return pattern
    if pattern.endswith("/**") and not glob.has_magic(pattern[:-3]):
        return pattern + "/*"
    raise UserError(
        f"{path}: libraries glob {pattern!r}: use a file's path or a folder ending in /** "
        "(as spark-pipelines does)"
    )


def is_sdp_spec(path: Path) -> bool:
    """Whether ``path`` is an SDP project's spec (by its name, as SDP finds it)."""
    return path.name in SDP_SPEC_FILES
