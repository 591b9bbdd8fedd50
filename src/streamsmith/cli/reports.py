"""Batch work over what the streams produced: ``report`` and ``train``."""

from __future__ import annotations

from typing import Annotated

import typer

from streamsmith.cli.common import Format, Root, Sets, SpecFiles, print_rows, say, session, spec_for
from streamsmith.errors import UserError
from streamsmith.object_store import local_only

report_cli = typer.Typer(
    rich_markup_mode="markdown",
    help="Batch reports over what the streams produced.",
    no_args_is_help=True,
)
train_cli = typer.Typer(
    rich_markup_mode="markdown",
    help="Train models on the lake for the streams to use.",
    no_args_is_help=True,
)


@report_cli.command("nest-sightings")
def report_nest_sightings(
    min_count: Annotated[
        int, typer.Option("--min-count", help="Report windows with more sightings.")
    ] = 0,
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
    fmt: Format = "table",
) -> None:
    """Zip codes and hours with many person sightings, from the nest-camera-stats topic."""
    from streamsmith.apps.nest import sightings_report

    _, pipeline = spec_for("nest", spec, set_, root)
    spark = session(pipeline, "report")
    frame = sightings_report(spark, pipeline, min_count)
    print_rows(frame.collect(), frame.columns, f"windows with more than {min_count} sightings", fmt)


@report_cli.command("secops")
def report_secops(
    day: Annotated[str, typer.Option("--date", help="The day to report, YYYY-MM-DD (UTC).")],
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
    fmt: Format = "table",
) -> None:
    """A day of the security platform: failed logins, top talkers, alerts, as lake tables
    and one HTML page with charts."""
    from datetime import date

    from streamsmith.apps.secops_report import secops_report

    try:
        wanted = date.fromisoformat(day)
    except ValueError:
        raise UserError(f"--date {day!r}: write the day as YYYY-MM-DD") from None
    _, pipeline = spec_for("secops", spec, set_, root)
    spark = session(pipeline, "report")
    report = secops_report(spark, pipeline, wanted)
    figures = ", ".join(f"{value} {label}" for label, value in report.counts.items())
    say(f"{wanted}: {figures}")
    for title, rows in (
        ("alerts per rule", report.alerts),
        ("failed logins per user", report.failed_logins[:10]),
        ("top talkers", report.top_talkers),
    ):
        columns = list(rows[0].asDict()) if rows else []
        print_rows(rows, columns, title, fmt)
    say(f"report: {report.html}; tables: {', '.join(sorted(report.tables))}")


@train_cli.command("secops-anomaly")
def train_secops_anomaly(
    clusters: Annotated[int, typer.Option("--clusters", help="k of k-means.", min=1)] = 3,
    margin: Annotated[
        float, typer.Option("--margin", help="Threshold = largest training score x margin.")
    ] = 1.5,
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
) -> None:
    """Fit the host anomaly model on flow_logs; the running stream picks it up."""
    from streamsmith.apps.secops_report import train_anomaly_model
    from streamsmith.ml.anomaly import MODEL_NAME

    _, pipeline = spec_for("secops", spec, set_, root)
    local_only(pipeline.root, "train")
    spark = session(pipeline, "train")
    model, current = train_anomaly_model(spark, pipeline.root, clusters=clusters, margin=margin)
    say(
        f"trained {MODEL_NAME} {model.version} on {model.trained_on} host windows "
        f"(threshold {model.threshold:.3f}); current: {current}"
    )
