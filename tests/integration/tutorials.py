"""Running a tutorial as its reader does: its bash blocks' commands in order, and its
titled code blocks written to the files they name."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

FENCE = re.compile(r"^```(\w+)(?: title=\"([^\"]+)\")?\n(.*?)^```", re.MULTILINE | re.DOTALL)


def steps(markdown: str) -> Iterator[tuple[str, str, str | None]]:
    """("bash", command, None) per command line, ("file", text, name) per titled block."""
    for language, title, body in FENCE.findall(markdown):
        if language == "bash":
            for line in body.splitlines():
                if line.strip():
                    yield "bash", line.strip(), None
        elif title:
            yield "file", body, title


def follow(
    markdown: str, home: Path
) -> Iterator[tuple[str, Path, subprocess.CompletedProcess[str]]]:
    """Do what the tutorial says, from ``home``: write its titled blocks, follow its
    ``cd``s, run its commands (each must succeed); yields each command with the folder
    it ran in and its result, before the next one runs."""
    cwd = home
    for kind, text, title in steps(markdown):
        if kind == "file":
            (cwd / str(title)).write_text(text, encoding="utf-8")
        elif text.startswith("cd "):
            cwd = cwd / text.split()[1]
        else:
            result = run(text, cwd)
            assert result.returncode == 0, f"{text}\n{result.stdout[-2000:]}\n{result.stderr}"
            yield text, cwd, result


def run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` as typed in a shell in ``cwd`` (``pytest`` through this Python)."""
    words = shlex.split(command)
    program = ["-m", "pytest", "-q", "-p", "no:cacheprovider"] if words[0] == "pytest" else []
    argv = [sys.executable, *(program or ["-m", "streamsmith"]), *words[1:]]
    env = {k: v for k, v in os.environ.items() if k != "STREAMSMITH_ROOT"}
    env["COLUMNS"] = "240"  # a wide terminal: query tables on one line each
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False
    )


def free_port() -> int:
    """A port free on 127.0.0.1 now: a reader whose 9092 is taken picks another, so do the
    tests."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
