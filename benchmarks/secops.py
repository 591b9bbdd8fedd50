"""The security platform: detection quality and the cost of a scheduled catch-up.

For each network size: generates two hours of logs with the injected incidents, trains
the anomaly model on a quiet day before (no anomaly injected), runs every flow of the
``secops`` app once with ``available-now`` (cold: the first run in the JVM; then warm,
outputs and checkpoints cleared in between), and prints

- the catch-up's wall time and input lines per second (all three sources, corrupt
  lines included) over the six flows;
- precision and recall of the alerts against the injected incidents;
- the anomalous host's window score against the model's threshold, and the highest
  score of any other host window (the margin the threshold leaves).

    .venv/bin/python benchmarks/secops.py --devices 20 100
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamsmith.apps import get_app
from streamsmith.config import Trigger, load_spec
from streamsmith.generate.secops import SOURCES, SecopsData, secops_data, write_secops
from streamsmith.io.lake import model_path, read_table, replace_static_table, table_path
from streamsmith.ml.anomaly import MODEL_NAME, AnomalyModel, save, train
from streamsmith.runtime.plan import Plan, build_plan
from streamsmith.runtime.runner import full_refresh, run_pipeline
from streamsmith.schemas.security import ASSETS_SCHEMA, FLOW_SCHEMA
from streamsmith.spark.session import build_session
from streamsmith.transforms.secops import host_windows

HISTORY_START = datetime(2026, 11, 19, 8, tzinfo=UTC)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--warm-runs", type=int, default=1)
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()

    app = get_app("secops")
    rows = []
    started = time.perf_counter()
    spark: SparkSession | None = None
    for devices in args.devices:
        with tempfile.TemporaryDirectory(prefix="streamsmith-bench-secops-") as tmp:
            root = Path(tmp)
            spec = load_spec(
                app.default_spec, sets=[f"spark.master={args.master}"], storage_root=str(root)
            )
            plan = build_plan(app, spec, Trigger("available-now"))
            data = secops_data(devices=devices, chunks=12, seed=1, corrupt_fraction=0.01)
            write_secops(data, root / "input" / "secops")
            replace_static_table(table_path(root, "assets"), data.assets, ASSETS_SCHEMA)
            if spark is None:
                spark = build_session(spec.spark, "streamsmith-bench-secops")
                print(f"session start: {time.perf_counter() - started:.1f} s")
            model = train_on_quiet_day(spark, root, devices)
            lines = sum(data.events[s] + data.corrupt[s] for s in SOURCES)
            runs = []
            for run in range(1 + args.warm_runs):
                if run:
                    full_refresh(plan)
                runs.append(catch_up(spark, plan))
            precision, recall = alert_quality(spark, root, data)
            anomalous, other = window_scores(spark, root, data, model)
            rows.append((devices, lines, runs, precision, recall, anomalous, other, model))

    print(f"{'devices':>7} {'lines':>7} {'run':>5} {'seconds':>8} {'lines/s':>8}")
    for devices, lines, runs, *_ in rows:
        for number, seconds in enumerate(runs):
            label = "cold" if number == 0 and rows[0][0] == devices else "warm"
            print(f"{devices:>7} {lines:>7} {label:>5} {seconds:>8.1f} {lines / seconds:>8,.0f}")
    print()
    print(f"{'devices':>7} {'precision':>9} {'recall':>6} {'anomaly':>8} {'threshold':>9} "
          f"{'other max':>9}")  # fmt: skip
    for devices, _, _, precision, recall, anomalous, other, model in rows:
        print(f"{devices:>7} {precision:>9.2f} {recall:>6.2f} {anomalous:>8.2f} "
              f"{model.threshold:>9.2f} {other:>9.2f}")  # fmt: skip


def train_on_quiet_day(spark: SparkSession, root: Path, devices: int) -> AnomalyModel:
    """The model fitted on the day before (same network, no anomaly), made current."""
    history = secops_data(devices=devices, seed=2, anomalous_host=False, start=HISTORY_START)
    model, fitted = train(host_windows(_flows(spark, history)))
    save(model, fitted, model_path(root, MODEL_NAME))
    return model


def catch_up(spark: SparkSession, plan: Plan) -> float:
    """Seconds for one ``available-now`` run of every flow over all input."""
    started = time.perf_counter()
    run_pipeline(spark, plan)
    return time.perf_counter() - started


def alert_quality(spark: SparkSession, root: Path, data: SecopsData) -> tuple[float, float]:
    alerts = read_table(spark, table_path(root, "alerts")).collect()
    raised = {(a.rule, a.entity) for a in alerts}
    expected = {(i.rule, i.entity) for i in data.incidents}
    hits = len(raised & expected)
    return hits / max(len(raised), 1), hits / len(expected)


def window_scores(
    spark: SparkSession, root: Path, data: SecopsData, model: AnomalyModel
) -> tuple[float, float]:
    """The top score of the injected host's windows and of every other host's."""
    anomaly = next(i for i in data.incidents if i.rule == "anomaly")
    host = anomaly.entity.removeprefix("src_ip:")
    windows = host_windows(read_table(spark, table_path(root, "flow_logs"))).toPandas()
    scores = model.scores(windows)
    mine = windows["src_ip"] == host
    alerted = [json.loads(a.evidence) for a in read_table(spark, table_path(root, "alerts"))
               .filter(F.col("rule") == "anomaly").collect()]  # fmt: skip
    assert all(e["model"] == model.version for e in alerted)
    return float(scores[mine.to_numpy()].max()), float(scores[~mine.to_numpy()].max())


def _flows(spark: SparkSession, data: SecopsData) -> DataFrame:
    lines = [line.decode() for line in data.lines("flows")]
    flows = spark.read.schema(FLOW_SCHEMA).json(spark.sparkContext.parallelize(lines))
    return flows.dropna(subset=["event_time", "src_ip", "bytes"]).filter("bytes >= 0")


if __name__ == "__main__":
    main()
