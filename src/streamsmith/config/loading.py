"""Loading a spec: an app's defaults, then YAML files, then ``--set`` values, merged and
validated, with errors that name the file (or ``--set``) each bad key came from."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    ValidationError,
)

from streamsmith.config.models import (
    PipelineSpec,
)
from streamsmith.config.origins import describe_validation_error
from streamsmith.defaults import (
    STORAGE_ROOT_ENV,
    root_in,
)
from streamsmith.errors import UserError

_FREE_FORM_KEYS = frozenset({"conf", "options"})


def load_spec_file(
    path: Path,
    files: Sequence[Path] = (),
    sets: Sequence[str] = (),
    *,
    overrides: Mapping[str, Any] | None = None,
    storage_root: str | None = None,
    flows: Mapping[str, Any] | None = None,
) -> PipelineSpec:
    """The spec of a pipeline's YAML spec file, with further files and ``--set`` values
    layered over it. A relative ``storage_root`` in the file is taken from the file's
    folder, so the pipeline runs the same from anywhere. ``flows`` are what the file's
    flows fall back on (the pipeline's libraries say; see ``streamsmith.pipelines``);
    without them, as a reader of the lake loads it without the pipeline's code, each flow
    falls back on the only source and the lake table of its name. An SDP project's
    ``spark-pipeline.yml`` gives its name, storage and Spark settings (a ``streamsmith.yml``
    beside it layered over), without its flows, which only its code declares."""
    from streamsmith.config.sdp_project import is_sdp_spec, read_project

    if is_sdp_spec(path):
        project = read_project(path)
        overlay = [project.overlay] if project.overlay else []
        return load_spec(
            project.base_document,
            [*overlay, *files],
            sets,
            overrides=overrides,
            storage_root=storage_root,
        )
    folder = path.parent
    if flows is None:
        flows = _reader_flow_defaults(read_spec_yaml(path))
    spec = load_spec(
        {"storage_root": str(folder / "streamsmith-data"), "flows": dict(flows)},
        [path, *files],
        sets,
        overrides=overrides,
        storage_root=storage_root,
    )
    if spec.layer_of(("storage_root",)) == 0:
        spec = spec.model_copy(update={"storage_root": root_in(folder, spec.storage_root)})
    return spec


def _reader_flow_defaults(document: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A default source and sink for every flow of a spec file, enough to read its lake
    without loading its libraries' code."""
    sources = document.get("sources")
    flows = document.get("flows")
    only = next(iter(sources)) if isinstance(sources, Mapping) and len(sources) == 1 else None
    return {
        str(name): {"sink": {"format": "delta", "table": str(name)}}
        | ({"source": only} if only is not None else {})
        for name in (flows if isinstance(flows, Mapping) else ())
    }


def load_spec(
    default: Mapping[str, Any],
    files: Sequence[Path] = (),
    sets: Sequence[str] = (),
    *,
    overrides: Mapping[str, Any] | None = None,
    storage_root: str | None = None,
) -> PipelineSpec:
    """Merge an app's default spec with spec files and ``--set`` overrides, then validate.

    Precedence, lowest first: the app default, ``$STREAMSMITH_ROOT``, each file in order,
    each ``--set`` in order, ``overrides`` (a nested mapping, as code passes values: no
    dotted strings to compose) and finally ``storage_root`` (the CLI's ``--root``).
    """
    merged: dict[str, Any] = copy.deepcopy(dict(default))
    origins: list[tuple[str, dict[str, Any]]] = []
    env_root = os.environ.get(STORAGE_ROOT_ENV)
    if env_root:
        merged["storage_root"] = env_root
    for path in files:
        document = read_spec_yaml(path)
        origins.append((str(path), document))
        merged = deep_merge(merged, document)
    set_layer: dict[str, Any] = {}
    for assignment in sets:
        key, value = _parse_assignment(assignment)
        _set_dotted(set_layer, key, value)
    if set_layer:
        origins.append(("--set", set_layer))
        merged = deep_merge(merged, set_layer)
    if overrides:
        layer = copy.deepcopy(dict(overrides))
        origins.append(("the caller's overrides", layer))
        merged = deep_merge(merged, layer)
    if storage_root is not None:
        merged["storage_root"] = storage_root
    merged = _one_kind_of_sink(merged, [default, *(layer for _, layer in origins)])
    try:
        spec = PipelineSpec.model_validate(merged)
    except ValidationError as exc:
        app = default.get("app") or merged.get("app") or merged.get("name") or "?"
        raise UserError(describe_validation_error(exc, origins, str(app))) from None
    spec._origins = tuple(origins)
    return spec


def _one_kind_of_sink(
    merged: dict[str, Any], layers: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """``merged`` with each flow's ``sink`` or ``sinks``, whichever the later layer gave:
    a spec file's ``sinks`` replaces the ``sink`` an app's defaults give (and the other
    way round). Given in one layer, both stay, for the spec's check to name the flow."""
    flows = merged.get("flows")
    if not isinstance(flows, Mapping):
        return merged

    def last(flow: str, key: str) -> int:
        found = -1
        for index, layer in enumerate(layers):
            named = layer.get("flows")
            given = named.get(flow) if isinstance(named, Mapping) else None
            if isinstance(given, Mapping) and key in given:
                found = index
        return found

    kept = dict(flows)
    for name, flow in flows.items():
        if isinstance(flow, Mapping) and "sink" in flow and "sinks" in flow:
            single, several = last(name, "sink"), last(name, "sinks")
            if single != several:
                dropped = "sink" if several > single else "sinks"
                kept[name] = {key: value for key, value in flow.items() if key != dropped}
    return {**merged, "flows": kept}


def read_spec_yaml(path: Path) -> dict[str, Any]:
    """The mapping a spec file holds; UserError naming the file when it is missing, is not
    YAML, nests deeper than the parser can follow (RecursionError) or is not a mapping."""
    if not path.is_file():
        raise UserError(f"spec file {path} does not exist: check the path given to -f")
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise UserError(f"spec file {path} is not valid YAML: {exc}".replace("\n", " ")) from None
    except RecursionError:
        raise UserError(
            f"spec file {path} nests too deep to read: a spec is a few levels of keys"
        ) from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise UserError(
            f"spec file {path} must hold a mapping of keys, not {type(document).__name__}"
        )
    return document


def _parse_assignment(assignment: str) -> tuple[str, Any]:
    key, sep, raw = assignment.partition("=")
    if not sep or not key.strip():
        raise UserError(f"--set {assignment!r} must look like dotted.key=value")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:  # never taken as a string: [a, b or {x: 1 is a typo
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise UserError(
            f"--set {key.strip()}: the value is not valid YAML ({problem}); quote it to "
            f"mean text: --set {key.strip()}='\"...\"'"
        ) from None
    except RecursionError:
        raise UserError(f"--set {key.strip()}: the value nests too deep to read") from None
    return key.strip(), value


def _set_dotted(target: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = target
    for index, part in enumerate(parts[:-1]):
        if part in _FREE_FORM_KEYS:
            node = node.setdefault(part, {})
            node[".".join(parts[index + 1 :])] = value
            return
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise UserError(f"--set {key}: {part!r} already holds a value, not a mapping")
        node = child
    node[parts[-1]] = value


def deep_merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overlay`` laid over it, mapping by mapping (as spec layers are)."""
    result = dict(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(result.get(key), dict):
            result[key] = deep_merge(result[key], value)
        else:
            result[key] = value
    return result
