"""The security platform's batch jobs over the lake: the daily report and model training.

``streamsmith report secops --date D`` reads the tables the stream keeps (``auth_logs``,
``flow_logs``, ``alerts``) for day ``D``, runs the report transforms of
``streamsmith.transforms.secops`` on them, writes each result to a lake table
(``report_failed_logins``, ``report_top_talkers``, ``report_alerts``, partitioned by
``date``; running the report again replaces that day only) and renders one HTML page
with the figures, the tables and two charts.

``streamsmith train secops-anomaly`` fits the host anomaly model on every host window of
``flow_logs`` and makes it the current model, which the running ``alerts`` flow loads at
its next micro-batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from streamsmith.config import PipelineSpec
from streamsmith.errors import UserError
from streamsmith.io.lake import (
    is_table,
    kept_format,
    model_path,
    read_table,
    save_schema,
    table_path,
)
from streamsmith.ml.anomaly import MODEL_NAME, AnomalyModel, save, train
from streamsmith.transforms.secops import (
    alerts_by_rule,
    failed_logins_by_hour,
    failed_logins_by_user,
    host_windows,
    top_talkers,
)
from streamsmith.web.report import BarChart, Report, Table, render_html

REPORT_DIR = "reports"


@dataclass(frozen=True)
class SecopsReport:
    """What the report found, and where it wrote it."""

    day: date
    failed_logins: list[Row]
    top_talkers: list[Row]
    alerts: list[Row]
    failures_by_hour: list[Row]
    counts: dict[str, int]
    html: Path
    tables: dict[str, Path]


def secops_report(spark: SparkSession, spec: PipelineSpec, day: date) -> SecopsReport:
    """Run the report for ``day`` over the lake under the spec's storage root."""
    root = spec.root
    auth = _day(spark, root, "auth_logs", F.col("date") == F.lit(day))
    flows = _day(spark, root, "flow_logs", F.col("date") == F.lit(day))
    alerts = _day(spark, root, "alerts", F.to_date("first_seen") == F.lit(day))
    results = {
        "report_failed_logins": failed_logins_by_user(auth).orderBy(F.desc("failures"), "user"),
        "report_top_talkers": top_talkers(flows),
        "report_alerts": alerts_by_rule(alerts),
    }
    tables = {
        name: _write_day(frame, table_path(root, name), day) for name, frame in results.items()
    }
    collected = {name: read_table(spark, path).filter(F.col("date") == F.lit(day)).drop("date")
                 for name, path in tables.items()}  # fmt: skip
    failed = collected["report_failed_logins"].orderBy(F.desc("failures"), "user").collect()
    talkers = collected["report_top_talkers"].orderBy(F.desc("bytes"), "src_ip").collect()
    by_rule = collected["report_alerts"].orderBy("rule").collect()
    by_hour = failed_logins_by_hour(auth).collect()
    counts = {
        "logins": auth.count(),
        "failed logins": auth.filter(F.col("result") == "failure").count(),
        "network flows": flows.count(),
        "alerts": alerts.count(),
    }
    html = root / REPORT_DIR / f"secops-{day.isoformat()}.html"
    html.parent.mkdir(parents=True, exist_ok=True)
    page = _page(day, counts, failed, talkers, by_rule, by_hour)
    staging = html.with_name(f".{html.name}.tmp")
    staging.write_text(render_html(page), encoding="utf-8")
    staging.replace(html)
    return SecopsReport(day, failed, talkers, by_rule, by_hour, counts, html, tables)


def train_anomaly_model(
    spark: SparkSession, root: Path, *, clusters: int = 3, margin: float = 1.5
) -> tuple[AnomalyModel, Path]:
    """Fit the anomaly model on the lake's ``flow_logs`` under ``root`` and make it the
    current one; returns the model and the path of the current model's file."""
    flows = _day(spark, root, "flow_logs", F.lit(True))
    try:
        model, fitted = train(host_windows(flows), k=clusters, margin=margin)
    except ValueError as exc:
        raise UserError(f"cannot train {MODEL_NAME}: {exc}") from None
    return model, save(model, fitted, model_path(root, MODEL_NAME))


def _day(spark: SparkSession, root: Path, table: str, condition: Column) -> DataFrame:
    path = table_path(root, table)
    if not is_table(path):
        raise UserError(
            f"table {table} does not exist at {path}: run `streamsmith run secops` "
            "(or `streamsmith generate secops` first) before the report"
        )
    return read_table(spark, path).filter(condition)


def _write_day(frame: DataFrame, path: Path, day: date) -> Path:
    """Replace ``day``'s partition of a report table (Delta, or Parquet where an earlier
    version wrote one), leaving other days alone."""
    dated = frame.withColumn("date", F.lit(day))
    writer = dated.coalesce(1).write.mode("overwrite").partitionBy("date")
    if kept_format(path, "delta") == "parquet":
        writer.option("partitionOverwriteMode", "dynamic").parquet(str(path))
        save_schema(path, dated.schema)
    else:
        writer.format("delta").option("replaceWhere", f"date = '{day.isoformat()}'").save(str(path))
    return path


def _page(
    day: date,
    counts: dict[str, int],
    failed: list[Row],
    talkers: list[Row],
    by_rule: list[Row],
    by_hour: list[Row],
) -> Report:
    return Report(
        title=f"Security report, {day.isoformat()}",
        subtitle="authentication, network flows and alerts from the streamsmith lake (UTC)",
        figures=[(label, f"{value:,}") for label, value in counts.items()],
        parts=[
            BarChart(
                "Failed logins per hour (UTC)",
                [f"{r.hour:02d}" for r in by_hour],
                [float(r.failures) for r in by_hour],
            ),
            BarChart(
                "Alerts per rule", [r.rule for r in by_rule], [float(r.alerts) for r in by_rule]
            ),
            Table(
                "Alerts per rule",
                ["rule", "severity", "alerts", "entities"],
                [tuple(r) for r in by_rule],
            ),
            Table(
                "Failed logins per user",
                ["user", "failures", "sources", "first failure", "last failure"],
                [tuple(r) for r in failed],
            ),
            Table(
                "Top talkers",
                ["source", "bytes", "flows", "destinations", "ports"],
                [tuple(r) for r in talkers],
            ),
        ],
    )
