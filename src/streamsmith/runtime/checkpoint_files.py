"""What a query's checkpoint holds, read from its files: ``checkpoint show`` without Spark.

Spark keeps a checkpoint as plain files: ``metadata`` (the query id), ``offsets/<batch>``
(a version line, the batch's settings, then one line per source), ``commits/<batch>``
and, per stateful operator, ``state/<operator>/_metadata`` (its name, state stores and
partitions, written by Spark 3.5 and later). Those say everything but the state's rows;
their count comes from the query's last progress event in the event log (``numRowsTotal``
per operator), and the rows themselves from Spark's ``statestore`` reader
(:func:`state_samples`, the one part that needs a session).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamsmith.errors import UserError

# Hadoop's atomic rename writes ``.<name>.<uuid>.tmp`` and its checksum ``..<name>...crc``
_INTERRUPTED_WRITE = re.compile(r"\.\.?\d+\.[0-9a-f-]{36}\.tmp(\.crc)?")

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class StateOperator:
    """One stateful operator of a checkpoint, as Spark's state metadata records it."""

    operator_id: int
    name: str  # stateStoreSave, symmetricHashJoin, dedupe, transformWithStateExec...
    stores: tuple[str, ...]
    partitions: int
    rows: int | None = None  # at the end of ``rows_batch``, from the event log
    rows_batch: int | None = None
    state_variables: tuple[str, ...] = ()  # transformWithState's, each read on its own

    @property
    def parts(self) -> tuple[str, ...]:
        """What Spark's ``statestore`` reader reads one at a time: the state variables
        of a transformWithState operator, else the stores."""
        return self.state_variables or self.stores


@dataclass
class CheckpointView:
    """What ``checkpoint show`` prints for one query."""

    query: str
    path: Path
    exists: bool
    query_id: str | None = None
    last_batch: int | None = None
    last_commit: int | None = None
    first_commit: int | None = None
    offsets: list[Any] = field(default_factory=list)
    operators: list[StateOperator] = field(default_factory=list)


def read_checkpoint(
    query: str, path: Path, events: Iterable[Mapping[str, Any]] = ()
) -> CheckpointView:
    """The checkpoint at ``path`` from its files; state row counts from the query's last
    progress among ``events`` (the event log, oldest first)."""
    view = CheckpointView(query, path, (path / "offsets").is_dir())
    if not view.exists:
        return view
    metadata = path / "metadata"
    if metadata.is_file():
        view.query_id = json.loads(metadata.read_text(encoding="utf-8")).get("id")
    view.last_batch = _last_id(path / "offsets")
    commits = _ids(path / "commits")
    view.first_commit, view.last_commit = (commits[0], commits[-1]) if commits else (None, None)
    if view.last_batch is not None:
        lines = (path / "offsets" / str(view.last_batch)).read_text(encoding="utf-8")
        view.offsets = [_json_or_text(line) for line in lines.splitlines()[2:]]
    operators = [_operator(folder) for folder in _numbered(path / "state")]
    view.operators = _with_rows(operators, _last_progress(events, view.query_id))
    return view


def query_names_by_id(checkpoints: Path) -> dict[str, str]:
    """Each query id in the checkpoints under ``checkpoints`` (``<root>/checkpoints``)
    with its query's name (``<app>.<flow>``, a side query's role after it), read from
    the ``metadata`` files: what names the writer of a Delta version a streaming append
    committed, which records only the query's id."""
    names = {}
    for metadata in sorted(checkpoints.glob("*/*/metadata")):
        query_id = json.loads(metadata.read_text(encoding="utf-8")).get("id")
        if query_id:
            app, folder = metadata.parent.parent.name, metadata.parent.name
            names[str(query_id)] = f"{app}.{folder.replace('__', '.')}"
    return names


def _operator(folder: Path) -> StateOperator:
    """An operator from its metadata file: version 1 at ``_metadata/metadata``, version 2
    (transformWithState) the newest of ``_metadata/v2/<batch>``."""
    meta = folder / "_metadata"
    candidates = [meta / "metadata"] if (meta / "metadata").is_file() else []
    candidates += [meta / "v2" / str(batch) for batch in reversed(_ids(meta / "v2"))]
    if not candidates:  # written before Spark kept it: what the folders say
        partitions = _ids(folder)
        first = folder / str(partitions[0]) if partitions else folder
        stores = sorted(path.name for path in first.iterdir() if path.is_dir())
        return StateOperator(int(folder.name), "(no state metadata)",
                             tuple(stores or ["default"]), len(partitions))  # fmt: skip
    version, _, body = candidates[0].read_text(encoding="utf-8").partition("\n")
    if version.strip() not in ("v1", "v2"):
        raise UserError(f"{candidates[0]}: unknown state metadata version {version.strip()!r}")
    record = json.loads(body)
    info, stores = record["operatorInfo"], record["stateStoreInfo"]
    properties = json.loads(record.get("operatorPropertiesJson") or "{}")
    return StateOperator(
        operator_id=int(info["operatorId"]),
        name=str(info["operatorName"]),
        stores=tuple(str(store["storeName"]) for store in stores),
        partitions=max(int(store["numPartitions"]) for store in stores),
        state_variables=tuple(
            str(variable["stateName"]) for variable in properties.get("stateVariables") or ()
        ),
    )


def _last_progress(
    events: Iterable[Mapping[str, Any]], query_id: str | None
) -> Mapping[str, Any] | None:
    """The progress event of the query's latest batch (the query id outlives restarts)."""
    found = [
        event
        for event in events
        if event.get("event") == "progress" and query_id and event.get("query_id") == query_id
    ]
    return max(found, key=lambda event: int(event.get("batch_id") or 0), default=None)


def _with_rows(
    operators: list[StateOperator], progress: Mapping[str, Any] | None
) -> list[StateOperator]:
    """``operators`` with the row counts the progress reports for them: Spark lists its
    state operators in plan order, which is the order of their ids; same-named ones are
    paired in that order."""
    if progress is None or not progress.get("progress"):
        return operators
    reported: dict[str, list[int]] = {}
    for operator in json.loads(str(progress["progress"])).get("stateOperators") or []:
        name = str(operator.get("operatorName"))
        reported.setdefault(name, []).append(int(operator.get("numRowsTotal") or 0))
    batch = progress.get("batch_id")
    paired = []
    for operator in sorted(operators, key=lambda op: op.operator_id):
        counts = reported.get(operator.name) or []
        paired.append(
            replace(operator, rows=counts.pop(0), rows_batch=None if batch is None else int(batch))
            if counts
            else operator
        )
    return paired


def state_samples(
    spark: SparkSession, view: CheckpointView, rows: int
) -> dict[tuple[int, str], list[dict[str, Any]]]:
    """The first ``rows`` rows of each state store (or transformWithState variable), by
    (operator id, part), through Spark's ``statestore`` reader: the one part of a
    checkpoint only Spark decodes."""
    samples = {}
    for operator in view.operators:
        for part in operator.parts:
            key = "stateVarName" if operator.state_variables else "storeName"
            state = (
                spark.read.format("statestore")
                .option("operatorId", operator.operator_id)
                .option(key, part)
                .load(str(view.path))
            )
            found = state.limit(rows).collect()
            samples[(operator.operator_id, part)] = [row.asDict(recursive=True) for row in found]
    return samples


def clear_interrupted_writes(checkpoint: Path) -> list[Path]:
    """Remove what a process killed inside one of Spark's atomic log writes left in a
    query's ``offsets`` and ``commits``: a hidden ``.<batch>.<uuid>.tmp`` file (and its
    ``.crc``). Spark never reads one back, but before the first batch it wants those
    folders empty and refuses the checkpoint on every start (Spark 4's
    ``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``). Call only while no query runs on
    ``checkpoint``; returns the files removed."""
    removed = []
    for folder in ("offsets", "commits"):
        for leftover in (checkpoint / folder).glob(".*.tmp*"):
            if _INTERRUPTED_WRITE.fullmatch(leftover.name):
                leftover.unlink(missing_ok=True)
                removed.append(leftover)
    return removed


def _numbered(folder: Path) -> list[Path]:
    return [folder / str(number) for number in _ids(folder)]


def _ids(folder: Path) -> list[int]:
    """The numbered entries of a folder (batches, operators), in order."""
    if not folder.is_dir():
        return []
    return sorted(int(path.name) for path in folder.iterdir() if path.name.isdigit())


def _last_id(folder: Path) -> int | None:
    ids = _ids(folder)
    return ids[-1] if ids else None


def _json_or_text(line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return line
