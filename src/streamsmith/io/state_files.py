"""Small files streamsmith keeps its own state in, written so a power loss leaves either
the old file or the new one, never an empty or torn one that blocks the next ``run``.

A file is written beside its target, fsynced, renamed (or linked) over it, and then its
folder is fsynced, which makes the rename itself durable. A state file that is still
empty or torn (written by an older version, or damaged) is a UserError naming it.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from pathlib import Path
from typing import Any

from streamsmith.errors import UserError
from streamsmith.object_store import ObjectPath


def write_durably(path: Path, text: str, *, exclusive: bool = False, mode: int = 0o644) -> None:
    """Write ``text`` to ``path`` whole or not at all, durably.

    ``exclusive`` links instead of renaming, so FileExistsError says another writer took
    ``path`` first; ``mode`` is the file's permissions from its creation (a secret's 0600
    is never widened, not even for an instant). On S3 an object is put whole or not at
    all; ``exclusive`` is a check before the put there (one writer per storage root).
    """
    if isinstance(path, ObjectPath):
        if exclusive and path.exists():
            raise FileExistsError(errno.EEXIST, "already written", str(path))
        path.write_text(text, encoding="utf-8")
        return
    staging = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    staging.unlink(missing_ok=True)  # a killed writer's, of a process with our pid
    descriptor = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        if exclusive:
            os.link(staging, path)
        else:
            os.replace(staging, path)
    finally:
        staging.unlink(missing_ok=True)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def read_json_state(path: Path, remedy: str) -> Any:
    """The JSON document in ``path``; UserError naming the file and ``remedy`` (what to
    do) when it is empty or torn."""
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        state = "empty" if not text.strip() else "not whole JSON"
        raise UserError(
            f"state file {path} is {state} (a write cut short, e.g. by a power loss): {remedy}"
        ) from None
