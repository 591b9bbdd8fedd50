"""``streamsmith table`` acts on the lake's own tables only: a name that climbs out of
``<root>/tables`` (``../``), an absolute one or one the lake has no table by is refused
before anything is read, written or deleted."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from typer.testing import CliRunner

from streamsmith.cli import cli
from streamsmith.errors import UserError


def _table_command(*args: str) -> str:
    """What ``streamsmith table ...`` refuses with (a UserError reaches the user as one
    line through streamsmith.cli.main; here, the exception)."""
    result = CliRunner().invoke(cli, ["table", *args])
    assert isinstance(result.exception, UserError), result.output
    return str(result.exception)


def _outside_table(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A lake at ``tmp_path/R/data`` and, beside it, a Delta table ``outside/precious`` of
    two versions whose first file is 30 days old; (lake root, table, old file)."""
    root = tmp_path / "R" / "data"
    (root / "tables").mkdir(parents=True)
    precious = tmp_path / "outside" / "precious"
    write_deltalake(str(precious), pa.table({"x": [1]}))
    write_deltalake(str(precious), pa.table({"x": [2]}), mode="overwrite")
    (old,) = {Path(uri) for uri in DeltaTable(str(precious), version=0).file_uris()}
    then = time.time() - 30 * 24 * 3600
    os.utime(old, (then, then))
    return root, precious, old


@pytest.mark.parametrize(
    "command",
    [
        ["restore", "{name}", "--version", "0"],
        ["vacuum", "{name}", "--retain-hours", "168"],
        ["optimize", "{name}"],
        ["history", "{name}"],
        ["convert", "{name}"],
    ],
)
@pytest.mark.parametrize("how", ["climbing", "absolute"])
def test_table_commands_refuse_a_table_outside_the_lake(
    tmp_path: Path, command: list[str], how: str
) -> None:
    root, precious, old = _outside_table(tmp_path)
    name = "../../../outside/precious" if how == "climbing" else str(precious)
    message = _table_command(*(arg.format(name=name) for arg in command), "--root", str(root))
    assert message.startswith(f"no lake table {name!r} under {root}")
    assert "\n" not in message
    assert DeltaTable(str(precious)).version() == 1
    assert old.exists()


def test_table_commands_name_the_lake_tables_when_the_name_is_unknown(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    write_deltalake(str(root / "tables" / "balances"), pa.table({"x": [1]}))
    missing = _table_command("history", "nope", "--root", str(root))
    found = CliRunner().invoke(cli, ["table", "history", "balances", "--root", str(root)])
    assert missing == f"no lake table 'nope' under {root} (its tables: balances)"
    assert found.exit_code == 0, found.output
    assert "WRITE" in found.output
