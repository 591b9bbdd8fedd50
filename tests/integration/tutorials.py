"""Running a tutorial as its reader does: its bash blocks' commands in order, and its
titled code blocks written to the files they name."""

from __future__ import annotations

import os
import re
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
    markdown: str, home: Path, shell: Shell | None = None
) -> Iterator[tuple[str, Path, subprocess.CompletedProcess[str]]]:
    """Do what the tutorial says, from ``home``, in ``shell`` (by default one whose
    virtualenv is active, as the first tutorial leaves it): write its titled blocks,
    follow its ``cd``s, run its commands in bash as printed (each must succeed); yields
    each command with the folder it ran in and its result, before the next one runs."""
    shell = shell or Shell.activated()
    cwd = home
    for kind, text, title in steps(markdown):
        if kind == "file":
            (cwd / str(title)).write_text(text, encoding="utf-8")
            continue
        for command in re.sub(r"\s+#.*$", "", text).split(" && "):
            if command.startswith("cd "):
                cwd = cwd / command.split()[1]
                continue
            result = shell.run(command, cwd)
            assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}\n{result.stderr}"
            yield command, cwd, result


def run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` as typed in ``cwd`` in a shell whose virtualenv is active."""
    return Shell.activated().run(command, cwd)


VENV = Path(sys.prefix)  # the virtualenv running the tests: what `make setup` made


class Shell:
    """A reader's terminal: commands run in bash as printed, with its environment, which
    ``source <venv>/bin/activate`` changes as it does in a terminal."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    @classmethod
    def fresh(cls) -> Shell:
        """A new terminal: no virtualenv active, whatever runs the tests."""
        env = {k: v for k, v in os.environ.items() if k not in ("STREAMSMITH_ROOT", "VIRTUAL_ENV")}
        bin_ = str(VENV / "bin")
        env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != bin_)
        env["COLUMNS"] = "240"  # a wide terminal: query tables on one line each
        return cls(env)

    @classmethod
    def activated(cls) -> Shell:
        """A terminal in which ``source .venv/bin/activate`` ran."""
        shell = cls.fresh()
        shell.env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{shell.env['PATH']}"
        shell.env["VIRTUAL_ENV"] = str(VENV)
        return shell

    def run(self, command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """``command`` in bash in ``cwd``; a ``source`` keeps the environment it leaves."""
        sourcing = command.startswith(("source ", ". "))
        script = f"{command} && env -0" if sourcing else command
        result = subprocess.run(
            ["bash", "-c", script], cwd=cwd, env=self.env, capture_output=True, text=True,
            timeout=900, check=False,
        )  # fmt: skip
        if sourcing and result.returncode == 0:
            pairs = (entry.split("=", 1) for entry in result.stdout.split("\0") if "=" in entry)
            self.env = dict(pairs)  # type: ignore[arg-type]
            result.stdout = ""
        return result


def free_port() -> int:
    """A port free on 127.0.0.1 now: a reader whose 9092 is taken picks another, so do the
    tests."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
