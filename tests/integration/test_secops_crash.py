"""The alerts flow under a crash: SIGKILL mid-batch, restart on the checkpoint, and every
injected incident is alerted exactly once (state and timers survive, ids do not repeat)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from crashing import batch_ids, kill_mid_batch, spawn, wait_until
from pyspark.sql import SparkSession

from streamsmith.generate.secops import secops_data, write_secops
from streamsmith.io.lake import read_table, replace_static_table, table_path
from streamsmith.schemas.security import ASSETS_SCHEMA

# make test crashes a stateful flow too (actions, state and PostgreSQL ledger restored)
pytestmark = [pytest.mark.slow, pytest.mark.deep]

CHECKPOINT = Path("checkpoints/secops/alerts")
ONLY_ALERTS = [
    "--set", "spark.master=local[2]",
    "--set", "spark.conf.spark.sql.shuffle.partitions=2",
    *(arg for flow in ("auth_logs", "dhcp_logs", "flow_logs", "auth_devices", "leases")
      for arg in ("--set", f"flows.{flow}.enabled=false")),
    *(arg for source in ("auth", "dhcp", "flows")
      for arg in ("--set", f"sources.{source}.max_files_per_trigger=1")),
]  # fmt: skip


def test_sigkill_mid_batch_then_restart_raises_each_alert_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    data = secops_data(chunks=12, seed=1)
    write_secops(data, tmp_path / "input" / "secops")
    replace_static_table(table_path(tmp_path, "assets"), data.assets, ASSETS_SCHEMA)
    command = [sys.executable, "-m", "streamsmith", "run", "secops", "--root", str(tmp_path)]

    running = spawn([*command, "--trigger", "interval=0s", *ONLY_ALERTS])
    checkpoint = tmp_path / CHECKPOINT
    # Past the brute force (chunk 4), so state and raised alerts exist at the crash.
    wait_until(running, lambda: len(batch_ids(checkpoint / "commits")) >= 5, 300)
    killed_in = kill_mid_batch(running, checkpoint)
    assert killed_in < 11, "the crash should leave work to do"
    before = read_table(spark, table_path(tmp_path, "alerts")).count()
    assert before >= 2, "the brute-force alerts (user and source) should be in by then"

    restarted = spawn([*command, "--trigger", "available-now", *ONLY_ALERTS])
    _, stderr = restarted.communicate(timeout=600)
    assert restarted.returncode == 0, stderr[-3000:]

    alerts = read_table(spark, table_path(tmp_path, "alerts")).collect()
    raised = sorted((a.rule, a.entity) for a in alerts)
    expected = sorted((i.rule, i.entity) for i in data.incidents if i.rule != "anomaly")
    assert raised == expected  # no model trained here, so no anomaly alert
    assert len({a.alert_id for a in alerts}) == len(alerts)
