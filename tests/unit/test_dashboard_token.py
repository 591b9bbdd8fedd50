"""The dashboard's token: never on a command line (``ps`` shows it to every local user),
so read from a file only its owner reads or from the environment; and never a weak one
(one character repeated, a handful of characters) that a guess finds."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from streamsmith.cli import cli
from streamsmith.cli.monitoring import dashboard_token
from streamsmith.errors import UserError
from streamsmith.web.server import Dashboard

STRONG = "Zq3-v9Lw_e7Rt2Yx8Kp4Hn"


@pytest.mark.parametrize("weak", ["a" * 16, "ab" * 12, "abcabcabcabcabcabc", "1234123412341234"])
def test_a_weak_token_is_refused(tmp_path: Path, weak: str) -> None:
    with pytest.raises(UserError, match="too few different characters"):
        Dashboard(tmp_path, token=weak)


def test_the_token_comes_from_a_private_file_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STREAMSMITH_DASHBOARD_TOKEN", raising=False)
    private = tmp_path / "token"
    private.write_text(STRONG + "\n")
    private.chmod(0o600)
    assert dashboard_token(private) == STRONG
    assert dashboard_token(None) is None
    monkeypatch.setenv("STREAMSMITH_DASHBOARD_TOKEN", STRONG)
    assert dashboard_token(None) == STRONG

    private.chmod(0o644)
    with pytest.raises(UserError, match=r"--token-file .*token is readable by others"):
        dashboard_token(private)


def test_the_token_is_no_command_line_option() -> None:
    result = CliRunner().invoke(cli, ["dashboard", "--token", STRONG])
    assert result.exit_code == 2
    assert "No such option: --token" in result.output
