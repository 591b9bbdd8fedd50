"""What ``query`` and ``status`` print is the data as written: never Rich markup, never a
control sequence that reaches the terminal."""

from __future__ import annotations

import pytest

from streamsmith.cli.common import print_rows
from streamsmith.monitor.status import query_statuses
from streamsmith.monitor.status_view import compact_lines

HOSTILE = ["[link=http://evil.example]click[/link]", "[/]", "\x1b[2J\x1b[31mred\u202e"]


def test_query_table_cells_are_plain_text_with_controls_escaped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_rows([HOSTILE], ["[bold]name[/bold]", "b", "c"], None, "table")
    shown = capsys.readouterr().out
    assert "[link=http://evil.example]click[/link]" in shown and "[/]" in shown
    assert "[bold]name[/bold]" in shown
    assert "\x1b" not in shown and "\u202e" not in shown
    assert "\\x1b[2J\\x1b[31mred\\u202e" in shown


def test_query_csv_lines_end_with_a_newline_alone(capsys: pytest.CaptureFixture[str]) -> None:
    print_rows([["a,1", None], ["b", 2]], ["k", "v"], None, "csv")
    assert capsys.readouterr().out == 'k,v\n"a,1",\nb,2\n'


def test_status_escapes_control_characters_in_names_and_errors() -> None:
    events = [
        {"event": "started", "app": "a", "query": "a.f", "pid": 1},
        {"event": "gave_up", "app": "a", "query": "a.f", "pid": 1, "message": "\x1b]8;;x\x07y"},
    ]
    lines = compact_lines(query_statuses(events, alive=lambda pid: True), 200)
    assert not any("\x1b" in line or "\x07" in line for line in lines)
    assert any("\\x1b]8;;x\\x07y" in line for line in lines)
