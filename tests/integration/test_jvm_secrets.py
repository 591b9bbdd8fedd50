"""Secrets a spec hands Spark (``spark.conf``, or for an ``s3a://`` root the AWS keys of
the environment) never reach a command line, which every local user reads in
``/proc/<pid>/cmdline``: the driver JVM gets them from a file only this user can read,
and still uses them."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

# Builds a session from a spec in a fresh process (a JVM of its own), then reports which
# of the values it was asked to hide some process's command line holds, and what the
# driver's conf and Hadoop conf hold under each key.
CHILD = """
import json, sys
from pathlib import Path
from streamsmith.config import PipelineSpec
from streamsmith.spark.session import build_session

given = json.loads(sys.stdin.read())  # not argv: this process's command line is read too
spec, hidden = PipelineSpec.model_validate(given["spec"]), given["hidden"]
spark = build_session(spec.session_spark, "jvm-secrets")
try:
    visible = set()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            data = cmdline.read_bytes()
        except OSError:
            continue
        visible |= {key for key, value in hidden.items() if value.encode() in data}
    conf = spark.sparkContext.getConf()
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    print(json.dumps({
        "on_command_lines": sorted(visible),
        "conf": {key: conf.get(key, None) for key in hidden},
        "hadoop": {key: hadoop.get(key.removeprefix("spark.hadoop.")) for key in hidden},
        "jvm": spark.sparkContext._gateway.proc.pid,
    }))
finally:
    spark.stop()
"""


RATE = {
    "sources": {"s": {"format": "rate"}},
    "flows": {"f": {"source": "s", "sink": {"table": "f"}}},
}


def _session_report(
    spec: dict[str, object], hidden: dict[str, str], env: dict[str, str]
) -> dict[str, object]:
    given = json.dumps({"spec": {**RATE, **spec}, "hidden": hidden})
    result = subprocess.run(
        [sys.executable, "-c", CHILD], input=given, capture_output=True, text=True,
        timeout=300, env={**os.environ, **env}, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return report


def test_spark_conf_secrets_reach_the_driver_but_no_command_line(tmp_path: Path) -> None:
    def token() -> str:
        return f"s3cr3t-{secrets.token_hex(12)}"

    hidden = {
        "spark.hadoop.fs.s3a.secret.key": token(),
        "spark.hadoop.fs.s3a.access.key": token(),
        "spark.hadoop.fs.s3a.session.token": token(),
        "spark.authenticate.secret": token(),
        "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net": token(),
    }
    spec = {
        "app": "jvm_secrets",
        "storage_root": str(tmp_path / "lake"),
        "spark": {"master": "local[1]", "conf": {**hidden, "spark.ui.enabled": "false"}},
    }

    report = _session_report(spec, hidden, {})

    assert report["on_command_lines"] == []
    assert report["conf"] == hidden
    hadoop = {key: value for key, value in hidden.items() if key.startswith("spark.hadoop.")}
    assert {key: report["hadoop"][key] for key in hadoop} == hadoop  # type: ignore[index]
    assert not list((tmp_path / "lake").rglob("*.properties"))


def test_aws_keys_of_the_environment_reach_s3a_but_no_command_line(tmp_path: Path) -> None:
    secret, key_id = f"env-{secrets.token_hex(16)}", f"AKIA{secrets.token_hex(8).upper()}"
    spec = {"app": "jvm_secrets", "storage_root": "s3a://lake-bucket/prefix",
            "spark": {"master": "local[1]"}}  # fmt: skip
    hidden = {"spark.hadoop.fs.s3a.secret.key": secret, "spark.hadoop.fs.s3a.access.key": key_id}
    env = {"AWS_SECRET_ACCESS_KEY": secret, "AWS_ACCESS_KEY_ID": key_id,
           "XDG_STATE_HOME": str(tmp_path / "state")}  # fmt: skip

    report = _session_report(spec, hidden, env)

    assert report["on_command_lines"] == []
    assert report["hadoop"] == {
        "spark.hadoop.fs.s3a.secret.key": secret,
        "spark.hadoop.fs.s3a.access.key": key_id,
    }
