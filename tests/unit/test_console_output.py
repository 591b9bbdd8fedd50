"""What ``query`` and ``status`` print is the data as written: never Rich markup, never a
control sequence that reaches the terminal."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from streamsmith.cli import common
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


FLIGHT = {
    "year": 2001, "month": 1, "day_of_month": 6, "carrier": "UA", "flight_number": 1234,
    "tail_number": "N123UA", "origin": "ORD", "destination": "SFO",
    "scheduled_departure": "2001-01-06 15:01:00", "departure_delay": 12, "taxi_out": None,
    "arrival_delay": -4,
}  # fmt: skip


def _shown(
    monkeypatch: pytest.MonkeyPatch, columns: list[str], rows: list[list[object]]
) -> list[str]:
    """What ``query`` prints of ``rows`` on an 80-column terminal."""
    terminal = Console(width=80, color_system=None, record=True, file=io.StringIO())
    monkeypatch.setattr(common, "out", terminal)
    print_rows(rows, columns, "flights", "table")
    return [line.rstrip() for line in terminal.export_text().splitlines()]


def test_a_result_too_wide_for_the_terminal_is_shown_record_by_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = _shown(monkeypatch, list(FLIGHT), [list(FLIGHT.values())] * 2)
    assert lines[:4] == [
        "flights",
        "-[ row 1 ]-",
        "year                 2001",
        "month                1",
    ]
    for name, value in FLIGHT.items():  # every name and value whole, none squeezed out
        assert f"{name:<19}  {'' if value is None else value}".rstrip() in lines
    assert lines.count("-[ row 2 ]-") == 1 and max(len(line) for line in lines) <= 80


def test_a_result_that_fits_stays_a_table(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _shown(monkeypatch, ["carrier", "flights"], [["UA", 12], ["AA", None]])
    assert lines[0] == "flights" and lines[2] == "┃ carrier ┃ flights ┃"
    assert "│ UA      │ 12      │" in lines and "│ AA      │         │" in lines


def test_status_escapes_control_characters_in_names_and_errors() -> None:
    events = [
        {"event": "started", "app": "a", "query": "a.f", "pid": 1},
        {"event": "gave_up", "app": "a", "query": "a.f", "pid": 1, "message": "\x1b]8;;x\x07y"},
    ]
    lines = compact_lines(query_statuses(events, alive=lambda pid: True), 200)
    assert not any("\x1b" in line or "\x07" in line for line in lines)
    assert any("\\x1b]8;;x\\x07y" in line for line in lines)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("terminal", [True, False])
def test_query_csv_escapes_controls_on_a_terminal_only(
    monkeypatch: pytest.MonkeyPatch, terminal: bool
) -> None:
    stdout = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr("sys.stdout", stdout)
    hostile = "a\x1b[31mred\x1b]0;title\x07\rgone"
    print_rows([[hostile]], ["v\x1b[2J"], None, "csv")
    shown = stdout.getvalue()
    if terminal:
        assert shown == "v\\x1b[2J\na\\x1b[31mred\\x1b]0;title\\x07\\rgone\n"
    else:
        assert shown == f"v\x1b[2J\n{hostile}\n"
