"""``streamsmith status`` as text that reads in an ordinary terminal.

One block per app, one line per flow, its queries indented under it. A query's line
holds its whole name, its state, the age of its last batch, its rates, lag, restarts,
and the records it quarantined or found late. Cells never get cut:
what does not fit the width goes on a continuation line, so a query name is always
printed whole (Spark, the logs and the dashboard know a query by that name).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from streamsmith.console import printable
from streamsmith.monitor.status import QueryStatus

# The side queries a flow may have, by the suffix of their names (see runtime.plan).
_ROLES = ("quarantine", "late")
# States that leave the query's last error worth a line of its own.
_TROUBLED = ("failed", "restarting")
_GAP = "  "
_QUERY_INDENT = 4
_CONTINUATION_INDENT = 8


@dataclass(frozen=True)
class _Row:
    """One query's cells: the head (name, state, age) and its figures."""

    name: str
    state: str
    age: str
    figures: tuple[tuple[str, str], ...]  # (label, value), label "" for free text
    error: str | None


def flow_of(app: str, query: str) -> tuple[str, str]:
    """The flow a query belongs to and its role, from its name: ``<app>.<flow>`` (the
    flow's ``main`` query), ``<app>.<flow>.quarantine`` or ``.late`` (its side queries),
    ``<app>.<flow>.<sink>`` (a further sink's query; its role is the sink's name). Flow
    names hold no dot. A query named otherwise (a memory sink's, after its table) is a
    flow of its own."""
    prefix = f"{app}."
    if not query.startswith(prefix):
        return query, "main"
    flow, _, member = query[len(prefix) :].partition(".")
    return flow, member or "main"


def batch_age(batch_time: str | None, now: datetime) -> str:
    """How long ago a batch ran, as a person says it: ``12s ago``, ``5m ago``, ``3h ago``."""
    if not batch_time:
        return "no batch yet"
    seconds = max(0, int((now - datetime.fromisoformat(batch_time)).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def rate(value: float | None) -> str:
    """Rows per second, in as few characters as the figure needs."""
    if value is None:
        return "-"
    if value >= 10_000:
        return f"{value / 1000:.0f}k/s"
    if value >= 10:
        return f"{value:.0f}/s"
    return f"{value:.1f}/s"


def compact_lines(
    statuses: Sequence[QueryStatus], width: int = 80, now: datetime | None = None
) -> list[str]:
    """The compact view: lines no wider than ``width`` (unless a single word is), every
    query name whole."""
    moment = now or datetime.now(UTC)
    apps: dict[str, dict[str, list[tuple[str, QueryStatus]]]] = {}
    for status in statuses:
        flow, role = flow_of(status.app, status.query)
        apps.setdefault(status.app, {}).setdefault(flow, []).append((role, status))
    lines: list[str] = []
    for app in sorted(apps):
        flows = apps[app]
        queries = sum(len(members) for members in flows.values())
        lines.append(f"{app}: {_count(len(flows), 'flow')}, {_count(queries, 'query')}")
        rows = {
            flow: [_row(status, moment) for _, status in sorted(members, key=_by_role)]
            for flow, members in flows.items()
        }
        block = [row for members in rows.values() for row in members]
        layout = _Layout.of(block, width)
        for flow, members in rows.items():
            lines += _split(f"flow {flow}", 2, width)
            for row in members:
                lines += layout.render(row)
    return [printable(line) for line in lines]  # names and errors come from the data


def _by_role(member: tuple[str, QueryStatus]) -> int:
    """A flow's main query first, then its further sinks', then its quarantine and
    late-events queries."""
    role = member[0]
    return 0 if role == "main" else 2 + _ROLES.index(role) if role in _ROLES else 1


def _count(number: int, noun: str) -> str:
    plural = "queries" if noun == "query" else f"{noun}s"
    return f"{number} {noun if number == 1 else plural}"


def latency_figure(status: QueryStatus) -> list[tuple[str, str]]:
    """``latency p50 12 ms, p99 40 ms`` for a Kafka-sourced flow (nothing for others)."""
    if status.latency_p50_ms is None:
        return []
    return [("latency", f"p50 {status.latency_p50_ms} ms, p99 {status.latency_p99_ms} ms")]


def _row(status: QueryStatus, now: datetime) -> _Row:
    figures: list[tuple[str, str]] = [
        ("in", rate(status.input_rate)),
        ("processed", rate(status.process_rate)),
        ("lag", "-" if status.lag is None else str(status.lag)),
        *latency_figure(status),
        ("restarts", str(status.restarts)),
        ("quarantined", str(status.quarantined)),
        ("late", str(status.late)),
    ]
    for name, counts in status.expectations.items():
        if counts["failed"]:
            judged = counts["passed"] + counts["failed"]
            figures.append(("", f"{name} failed {counts['failed']}/{judged}"))
    if status.schema_changes:
        figures.append(("schema changes", str(status.schema_changes)))
    for which, outcome in status.maintenance.items():
        figures.append(("", f"{which} {outcome}"))
    if status.schedule is not None:
        last = status.schedule.last_run or "none yet"
        ended = f" ({status.schedule.last_run_state})" if status.schedule.last_run_state else ""
        figures.append(("", f"schedule {status.schedule.cron}: last run {last}{ended}"))
        if status.schedule.next_run:
            figures.append(("", f"next {status.schedule.next_run}"))
    error = status.last_error if status.state in _TROUBLED else None
    return _Row(status.query, status.state, batch_age(status.last_batch_time, now),
                tuple(figures), error)  # fmt: skip


@dataclass(frozen=True)
class _Layout:
    """Column widths shared by an app's queries, so their cells line up, and whether
    each query fits on one line at ``width``."""

    width: int
    name: int
    state: int
    age: int
    figures: dict[str, int]
    one_line: bool

    @classmethod
    def of(cls, rows: Sequence[_Row], width: int) -> _Layout:
        figures: dict[str, int] = {}
        for row in rows:
            for label, value in row.figures:
                if label:
                    figures[label] = max(figures.get(label, 0), len(_cell(label, value)))
        layout = cls(
            width=width,
            name=max(len(row.name) for row in rows),
            state=max(len(row.state) for row in rows),
            age=max(len(row.age) for row in rows),
            figures=figures,
            one_line=False,
        )
        fits = all(
            len(_GAP.join(layout.head(row) + layout.cells(row)).rstrip()) <= width for row in rows
        )
        return replace(layout, one_line=fits)

    def head(self, row: _Row) -> list[str]:
        indent = " " * _QUERY_INDENT
        return [
            indent + row.name.ljust(self.name),
            row.state.ljust(self.state),
            row.age.ljust(self.age),
        ]

    def cells(self, row: _Row) -> list[str]:
        return [
            _cell(label, value).ljust(self.figures[label]) if label else value
            for label, value in row.figures
        ]

    def render(self, row: _Row) -> list[str]:
        """The query's lines: one when the app's queries all fit, else its head (name,
        state, age) and its figures wrapped under it."""
        head, cells = self.head(row), self.cells(row)
        if self.one_line:
            lines = [_GAP.join(head + cells)]
        elif len(_GAP.join(head).rstrip()) <= self.width:
            lines = [_GAP.join(head), *self._wrapped(cells)]
        else:  # the name alone fills the line
            lines = [
                *_split(row.name, _QUERY_INDENT, self.width),
                *self._wrapped([row.state, row.age, *cells]),
            ]
        if row.error:
            indent = " " * _CONTINUATION_INDENT
            lines += textwrap.wrap(
                f"error: {row.error}",
                width=self.width,
                initial_indent=indent,
                subsequent_indent=indent + "  ",
                break_on_hyphens=False,
            )
        return [line.rstrip() for line in lines]

    def _wrapped(self, cells: Sequence[str]) -> list[str]:
        indent = " " * _CONTINUATION_INDENT
        lines: list[str] = []
        line = ""
        for cell in cells:
            candidate = f"{line}{_GAP}{cell}" if line else indent + cell
            if line and len(candidate.rstrip()) > self.width:
                lines.append(line)
                candidate = indent + cell
            line = candidate
        if line:
            lines.append(line)
        return lines


def _split(text: str, indent: int, width: int) -> list[str]:
    """``text`` indented, on as many lines as it needs: a name wider than the line wraps
    at the line's end, it is never cut."""
    room = max(1, width - indent)
    return [" " * indent + text[start : start + room] for start in range(0, len(text), room)]


def _cell(label: str, value: str) -> str:
    return f"{label} {value}"
