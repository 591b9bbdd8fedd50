"""Readable HTML reports: a title, headline figures, tables and bar charts, in one file.

The page is self-contained (inline CSS, charts as inline SVG, no scripts), so it can be
mailed, archived or opened from a shared folder. Every value is HTML-escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any


@dataclass(frozen=True)
class Table:
    title: str
    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]


@dataclass(frozen=True)
class BarChart:
    title: str
    labels: Sequence[str]
    values: Sequence[float]
    unit: str = ""


@dataclass(frozen=True)
class Report:
    title: str
    subtitle: str = ""
    figures: Sequence[tuple[str, str]] = ()
    parts: Sequence[Table | BarChart] = field(default_factory=list)


_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 60rem;
       color: #1d2430; padding: 0 1rem; }
h1 { margin-bottom: .2rem; } .subtitle { color: #5b6575; margin-top: 0; }
.figures { display: flex; flex-wrap: wrap; gap: 1rem; margin: 1.5rem 0; }
.figure { border: 1px solid #d9dee7; border-radius: 6px; padding: .6rem 1rem; }
.figure b { display: block; font-size: 1.5rem; }
table { border-collapse: collapse; margin: .5rem 0 1.5rem; width: 100%; }
th, td { border-bottom: 1px solid #e3e7ee; padding: .3rem .6rem; text-align: left; }
th { background: #f3f5f8; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
svg text { font: 11px system-ui, sans-serif; fill: #1d2430; }
"""


def render_html(report: Report) -> str:
    """The report as one HTML document."""
    parts = [_part(part) for part in report.parts]
    figures = "".join(
        f'<div class="figure">{escape(label)}<b>{escape(value)}</b></div>'
        for label, value in report.figures
    )
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(report.title)}</title><style>{_STYLE}</style></head><body>"
        f'<h1>{escape(report.title)}</h1><p class="subtitle">{escape(report.subtitle)}</p>'
        f'<div class="figures">{figures}</div>{"".join(parts)}</body></html>\n'
    )


def _part(part: Table | BarChart) -> str:
    if isinstance(part, BarChart):
        return f"<h2>{escape(part.title)}</h2>{bar_chart_svg(part)}"
    if not part.rows:
        return f"<h2>{escape(part.title)}</h2><p>None.</p>"
    head = "".join(f"<th>{escape(str(c))}</th>" for c in part.columns)
    body = "".join("<tr>" + "".join(_cell(value) for value in row) + "</tr>" for row in part.rows)
    return f"<h2>{escape(part.title)}</h2><table><tr>{head}</tr>{body}</table>"


def _cell(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f'<td class="num">{value:,}</td>'
    return f"<td>{escape('' if value is None else str(value))}</td>"


def bar_chart_svg(chart: BarChart, width: int = 720, height: int = 220) -> str:
    """A vertical bar chart as inline SVG, each bar labelled with its value."""
    count = max(len(chart.values), 1)
    top = max(chart.values, default=0) or 1
    plot_h = height - 40
    slot = (width - 20) / count
    bars = []
    for index, (label, value) in enumerate(zip(chart.labels, chart.values, strict=True)):
        bar_h = plot_h * value / top
        x = 10 + index * slot + slot * 0.15
        y = 15 + plot_h - bar_h
        bars.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{slot * 0.7:.1f}" height="{bar_h:.1f}" '
            f'fill="#3f72af"><title>{escape(label)}: {value:g}{escape(chart.unit)}</title></rect>'
            f'<text x="{x + slot * 0.35:.1f}" y="{y - 3:.1f}" text-anchor="middle">'
            f"{value:g}</text>"
            f'<text x="{x + slot * 0.35:.1f}" y="{height - 8}" text-anchor="middle">'
            f"{escape(label)}</text>"
        )
    return (
        f'<svg role="img" aria-label="{escape(chart.title)}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}">{"".join(bars)}</svg>'
    )
