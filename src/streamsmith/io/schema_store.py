"""A source's record schema versions, kept under the storage root.

``schema: infer`` stores what it inferred as version 0; a later version is a new file,
never an edit, so what a run read with can always be told (``streamsmith schema show``).
Layout: ``<root>/schemas/<app>/<source>/<version>.json``, each holding the schema (Spark's
JSON form), when and why it was added, and the files it was inferred from.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql.types import StructType

from streamsmith.io.state_files import read_json_state, write_durably
from streamsmith.schemas.inference import (
    InferenceError,
    apply_hints,
    infer_schema,
    nests_deeper_than,
)

SCHEMAS_DIR = "schemas"


@dataclass(frozen=True)
class SchemaVersion:
    """One version of a source's schema."""

    version: int
    schema: StructType
    added_at: str
    reason: str
    sample: tuple[str, ...] = ()

    @property
    def ddl(self) -> str:
        """The schema as DDL, as a spec writes it."""
        return to_ddl(self.schema)


def to_ddl(schema: StructType) -> str:
    """``schema`` as DDL (``user string, ts timestamp``), without asking a JVM."""
    return ", ".join(f"{_quoted(f.name)} {f.dataType.simpleString()}" for f in schema.fields)


def _quoted(name: str) -> str:
    return name if name.isidentifier() else "`" + name.replace("`", "``") + "`"


def schema_dir(root: Path, app: str, source: str) -> Path:
    """Where the versions of ``source``'s schema live."""
    return root / SCHEMAS_DIR / app / source


def versions(folder: Path) -> list[SchemaVersion]:
    """Every version stored in ``folder`` (see :func:`schema_dir`), oldest first."""
    if not folder.is_dir():
        return []
    found = []
    for path in folder.glob("*.json"):
        if not path.stem.isdigit():
            continue
        remedy = "restore it from a backup, or remove it to infer this version again"
        document = read_json_state(path, remedy)
        found.append(
            SchemaVersion(
                version=int(document["version"]),
                schema=StructType.fromJson(document["schema"]),
                added_at=str(document["added_at"]),
                reason=str(document["reason"]),
                sample=tuple(document.get("sample", ())),
            )
        )
    return sorted(found, key=lambda v: v.version)


def latest(folder: Path) -> SchemaVersion | None:
    """The newest version stored in ``folder``, or None before the first."""
    stored = versions(folder)
    return stored[-1] if stored else None


def record(
    folder: Path, schema: StructType, reason: str, sample: tuple[str, ...] = ()
) -> SchemaVersion:
    """Store ``schema`` as the next version. The file is created exclusively, so two
    processes recording at once cannot both take one version number (the loser gets
    FileExistsError and reads the winner's)."""
    folder.mkdir(parents=True, exist_ok=True)
    previous = latest(folder)
    version = SchemaVersion(
        version=0 if previous is None else previous.version + 1,
        schema=schema,
        added_at=datetime.now(UTC).isoformat(timespec="seconds"),
        reason=reason,
        sample=sample,
    )
    document = {**asdict(version), "schema": schema.jsonValue(), "sample": list(sample)}
    text = json.dumps(document, indent=2)
    write_durably(folder / f"{version.version}.json", text, exclusive=True)  # taken: fails
    return version


# How much of the input ``schema: infer`` reads: the first files by name, and at most
# this many records of them (a bounded, repeatable sample).
SAMPLE_FILES = 50
SAMPLE_RECORDS = 5_000


@dataclass(frozen=True)
class InputSample:
    """What ``schema: infer`` read: the records (each with where it was read), what they
    came from (files, topic partitions), and where the input is, for errors."""

    records: list[tuple[str, Any]]
    read_from: tuple[str, ...]
    place: str


def inferred_schema(
    store: Path, take_sample: Callable[[], InputSample], hints: StructType | None
) -> SchemaVersion:
    """The newest schema stored in ``store``, or, before its first version, one inferred
    from ``take_sample()`` and stored as version 0. Raises
    :class:`~streamsmith.schemas.inference.InferenceError` when the sample cannot decide."""
    stored = latest(store)
    if stored is not None:
        return stored
    sample = take_sample()
    schema = sampled_schema(sample, hints)
    try:
        return record(store, schema, "inferred from the first input", sample.read_from)
    except FileExistsError:  # another process stored version 0 first: read with it
        winner = latest(store)
        assert winner is not None
        return winner


def sampled_schema(sample: InputSample, hints: StructType | None) -> StructType:
    """The schema of the records in ``sample`` with ``hints`` applied, stored nowhere.
    Raises :class:`~streamsmith.schemas.inference.InferenceError` when it cannot decide."""
    if not sample.records:
        raise InferenceError(
            f"no input to infer the schema from in {sample.place}: deliver some first, or "
            "give the schema as DDL"
        )
    schema = infer_schema(sample.records)
    if hints is not None:
        unknown = [name for name in hints.fieldNames() if name not in schema.fieldNames()]
        if unknown:
            raise InferenceError(
                f"schema_hints name field(s) {', '.join(unknown)}, which no sampled record "
                f"holds (sampled: {', '.join(schema.fieldNames())})"
            )
        schema = apply_hints(schema, hints)
    return schema


def file_sample(folder: Path, glob: str | None) -> InputSample:
    """The first JSON-lines files of ``folder`` by name (gzipped or not): up to
    SAMPLE_FILES files and SAMPLE_RECORDS records."""
    files = _sample_files(folder, glob)
    return InputSample(list(_records(files)), tuple(str(f) for f in files), str(folder))


def value_sample(values: list[tuple[str, bytes]], place: str) -> InputSample:
    """Records from JSON values (Kafka's), each with where it was read; a value that does
    not parse is left to the run, which quarantines it."""
    records = []
    for where, value in values:
        parsed = _parsed(value)
        if parsed is not _MALFORMED:
            records.append((where, parsed))
    read_from = tuple(dict.fromkeys(where.rpartition("@")[0] for where, _ in values))
    return InputSample(records, read_from, place)


_MALFORMED = object()


def _parsed(text: str | bytes) -> Any:
    """``text`` parsed as JSON, or ``_MALFORMED`` when it is not JSON or nests too deep
    (Python's parser raises RecursionError; inference leaves out past MAX_NESTING): such
    a record is left out of the sample, and the run quarantines what it cannot read."""
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return _MALFORMED
    return _MALFORMED if nests_deeper_than(value) else value


def _sample_files(folder: Path, glob: str | None) -> list[Path]:
    if not folder.is_dir():
        return []
    pattern = f"**/{glob}" if glob else "**/*"
    found = sorted(p for p in folder.glob(pattern) if p.is_file() and not p.name.startswith("."))
    return found[:SAMPLE_FILES]


def _records(files: list[Path]) -> Iterator[tuple[str, Any]]:
    """Each parsable JSON line of ``files`` (gzipped or not), up to SAMPLE_RECORDS; a line
    that does not parse is left to the run, which quarantines it."""
    count = 0
    for path in files:
        with path.open("rb") as head:
            gzipped = head.read(2) == b"\x1f\x8b"
        opener = gzip.open if gzipped else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as lines:
            try:
                for number, line in enumerate(lines, 1):
                    if not line.strip():
                        continue
                    value = _parsed(line)
                    if value is _MALFORMED:
                        continue
                    yield f"{path.name}:{number}", value
                    count += 1
                    if count >= SAMPLE_RECORDS:
                        return
            except (EOFError, zlib.error, gzip.BadGzipFile):
                continue  # a damaged gzip file: its whole lines are sampled, the run says more
