"""The CLI as a user runs it: a subprocess per command, asserting on output and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

from inprocess import in_project, invoke
from streamsmith.io.lake import read_table


def streamsmith(
    *args: str, cwd: Path, timeout: float = 300, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m streamsmith ARGS`` in ``cwd``, 200 columns wide, ``env`` over ours."""
    return subprocess.run(
        [sys.executable, "-m", "streamsmith", *args],
        cwd=cwd,
        env=command_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def command_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Our environment for a command, without a storage root of its own, 200 columns wide
    unless ``extra`` says otherwise."""
    env = {k: v for k, v in os.environ.items() if k != "STREAMSMITH_ROOT"}
    return {**env, "COLUMNS": "200", **(extra or {})}


def assert_user_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_dry_run_prints_the_plan_without_spark(tmp_path: Path) -> None:
    result = streamsmith(
        "dry-run", "cloudtrail", "--root", str(tmp_path), "--trigger", "available-now",
        "--set", "sources.cloudtrail_logs.max_files_per_trigger=3",
        cwd=tmp_path, timeout=60,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"storage root: {tmp_path}" in out
    assert f"json files in {tmp_path}/input/cloudtrail (maxFilesPerTrigger=3" in out
    assert f"checkpoint {tmp_path}/checkpoints/cloudtrail/cloudtrail_events\n" in out
    assert f"checkpoint {tmp_path}/checkpoints/cloudtrail/cloudtrail_events__quarantine" in out
    assert "[append, partitioned by date, trigger available-now]" in out
    assert not (tmp_path / "checkpoints").exists()  # a dry run touches nothing


def test_generate_secops_writes_each_source_and_the_inventory(tmp_path: Path) -> None:
    result = streamsmith("generate", "secops", "--root", str(tmp_path), "--chunks", "4",
                         cwd=tmp_path, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    for source in ("auth", "dhcp", "flows"):
        files = sorted((tmp_path / "input" / "secops" / source).glob("*.json"))
        assert [f.name for f in files] == [f"secops-{source}-{n:05d}.json" for n in range(4)]
    assert (tmp_path / "tables" / "assets" / "part-00000.parquet").is_file()
    assert "brute_force user:user-03" in result.stdout
    plan = streamsmith("dry-run", "secops", "--root", str(tmp_path), cwd=tmp_path, timeout=60)
    assert "joins stream dhcp from source dhcp" in plan.stdout, plan.stderr
    extra = "flows.alerts.streams.leases=dhcp"
    missing = streamsmith("dry-run", "secops", "--root", str(tmp_path), "--set", extra,
                          cwd=tmp_path, timeout=60)  # fmt: skip
    assert_user_error(missing, "flow 'alerts' of app 'secops' has no stream input(s) leases")


def test_generate_ysb_writes_the_events_and_the_campaigns(tmp_path: Path) -> None:
    result = streamsmith("generate", "ysb", "--root", str(tmp_path), "--events", "2000",
                         "--rate", "100", "--chunks", "2", "--corrupt", "0.05",
                         cwd=tmp_path, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    files = sorted((tmp_path / "input" / "ysb").glob("*.json"))
    assert [f.name for f in files] == ["ysb-00000.json", "ysb-00001.json"]
    lines = [line for f in files for line in f.read_text().splitlines()]
    broken = len(lines) - 2000
    assert 0 < broken < 200 and f"2000 ad events (+{broken} corrupt" in result.stdout
    assert "12:00:00 to 12:00:19 UTC" in result.stdout  # 2,000 events at 100 per second
    assert (tmp_path / "tables" / "ysb_campaigns" / "part-00000.parquet").is_file()
    bad = streamsmith("generate", "ysb", "--root", str(tmp_path), "--corrupt", "2",
                      cwd=tmp_path, timeout=60)  # fmt: skip
    assert_user_error(bad, "corrupt_fraction must be between 0 and 1")


def test_user_errors_are_one_line_with_exit_code_2(tmp_path: Path) -> None:
    assert_user_error(
        streamsmith("run", "nosuchapp", cwd=tmp_path, timeout=60),
        "unknown app 'nosuchapp'", "choose one of actions, activity, cloudtrail",
    )  # fmt: skip
    spec = tmp_path / "spec.yaml"
    spec.write_text("sources:\n  cloudtrail_logs:\n    formt: json\n")
    assert_user_error(
        streamsmith("dry-run", "cloudtrail", "-f", str(spec), cwd=tmp_path, timeout=60),
        "unknown key 'sources.cloudtrail_logs.formt'", str(spec),
    )  # fmt: skip
    assert_user_error(
        streamsmith("run", "cloudtrail", "--root", str(tmp_path / "r"), cwd=tmp_path, timeout=60),
        f"input directory {tmp_path}/r/input/cloudtrail", "streamsmith generate cloudtrail",
    )  # fmt: skip
    (tmp_path / "file").write_text("")
    assert_user_error(
        streamsmith("run", "cloudtrail", "--root", str(tmp_path / "file/r"), cwd=tmp_path),
        f"storage root {tmp_path}/file/r is not writable", "--root",
    )  # fmt: skip
    assert_user_error(
        streamsmith("run", "cloudtrail", "--trigger", "sometimes", cwd=tmp_path, timeout=60),
        "--trigger: invalid trigger 'sometimes'",
    )  # fmt: skip
    assert_user_error(
        streamsmith("generate", "cloudtrail", "--out", str(tmp_path / "g"), "--corrupt-fraction",
                    "2", cwd=tmp_path, timeout=60),
        "corrupt_fraction",
    )  # fmt: skip


@pytest.mark.slow
def test_query_on_a_postgres_table_says_where_it_lives_and_leaves_no_warehouse(
    tmp_path: Path,
) -> None:
    spec = {
        "name": "counts",
        "storage_root": "data",
        "sources": {"events": {"format": "jsonl", "path": "input", "schema": "user string"}},
        "flows": {
            "user_counts": {
                "sql": "SELECT user, count(*) AS n FROM events GROUP BY user",
                "sink": {"format": "postgres", "table": "user_counts", "key": ["user"],
                         "output_mode": "update"},
            }
        },
    }  # fmt: skip
    (tmp_path / "streamsmith.yml").write_text(yaml.safe_dump(spec))
    (tmp_path / "data/tables").mkdir(parents=True)
    sql = "SELECT * FROM user_counts ORDER BY n DESC"
    for engine in ("auto", "spark"):  # said before Spark starts
        result = streamsmith("query", sql, "--engine", engine, cwd=tmp_path, timeout=60)
        assert_user_error(
            result,
            "table user_counts is in PostgreSQL, not the lake: flow user_counts writes it to "
            f"public.user_counts on the embedded server in {tmp_path}/data/postgres",
            "psql",
        )
    missing = streamsmith("query", "SELECT * FROM nowhere", "--engine", "spark", cwd=tmp_path)
    assert_user_error(missing, "nowhere")
    assert not (tmp_path / "spark-warehouse").exists()  # Spark's is under the storage root
    assert sorted(path.name for path in tmp_path.iterdir()) == ["data", "streamsmith.yml"]


def test_broker_start_status_topic_create_stop(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``broker start`` authenticates: a client that does not log in is refused, while
    streamsmith's own commands and a pipeline's run log in with the broker's secret."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from streamsmith.io.kafka.login import librdkafka_login
    from streamsmith.spark.auth import BROKER, secret_path

    root = str(tmp_path)
    started = streamsmith("broker", "start", "--root", root, cwd=tmp_path, timeout=60)
    try:
        assert started.returncode == 0, started.stderr
        port = int(started.stdout.split("127.0.0.1:")[1].split()[0])
        address = f"127.0.0.1:{port}"
        # The commands after the start in this process: the broker's own process is the
        # point, not theirs.
        again = invoke("broker", "start", "--root", root)
        status = invoke("broker", "status", "--root", root)
        created = invoke("topic", "create", "events", "--partitions", "3", "--root", root)
        with pytest.raises(KafkaException):  # no login: not even the topics are listed
            AdminClient({"bootstrap.servers": address}).list_topics(timeout=10)
        topics = AdminClient(librdkafka_login({"bootstrap.servers": address})).list_topics(
            timeout=10
        )
        (tmp_path / "clicks.jsonl").write_text(
            "".join(json.dumps({"user": f"u{i}", "n": i}) + "\n" for i in range(7))
        )
        produced = invoke("topic", "produce", "events", str(tmp_path / "clicks.jsonl"),
                          "--root", root)  # fmt: skip
        spec = {
            "name": "clicks", "storage_root": "data", "kafka": {"bootstrap_servers": address},
            "sources": {"clicks": {"format": "kafka", "schema": "user string, n int",
                                   "options": {"subscribe": "events",
                                               "startingOffsets": "earliest"}}},
            "flows": {"clicks": {"source": "clicks", "sql": "SELECT user, n FROM clicks",
                                 "sink": {"format": "delta", "table": "clicks"}}},
        }  # fmt: skip
        (tmp_path / "clicks.yml").write_text(yaml.safe_dump(spec))
        # The run in this process's session: the commands above are the broker's.
        in_project(monkeypatch, tmp_path)
        ran = invoke("run", "clicks.yml", "--trigger", "available-now")
        secret_mode = secret_path(BROKER, address).stat().st_mode & 0o777
    finally:
        stopped = invoke("broker", "stop", "--root", root)
    after = invoke("broker", "status", "--root", root)

    assert f"broker running on 127.0.0.1:{port}" in again.stdout  # idempotent
    assert status.stdout.strip() == f"broker running on 127.0.0.1:{port}"
    assert created.stdout.strip() == f"created topic events on 127.0.0.1:{port}"
    assert len(topics.topics["events"].partitions) == 3
    assert secret_mode == 0o600
    assert produced.stdout.strip() == f"produced 7 records to topic events on {address}"
    assert ran.returncode == 0, ran.stderr
    clicks = read_table(spark, tmp_path / "data/tables/clicks")
    assert sorted(row.n for row in clicks.collect()) == list(range(7))
    assert (tmp_path / "broker/broker.json").is_file() is False  # removed by stop
    assert (tmp_path / "broker/broker.log").is_file()
    assert (tmp_path / "broker/data/meta.properties").is_file()  # topics outlive a stop
    assert stopped.stdout.strip() == "stopped"
    assert after.returncode == 1 and "no broker running" in after.stdout


@pytest.mark.deep  # make test covers the signals flows' reconciliation in-process
def test_signals_demo_reconciles_every_event() -> None:
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="streamsmith-demo-"))
    base.chmod(0o755)  # the demo's PostgreSQL runs as the postgres user when we are root
    try:
        result = streamsmith("demo", "signals", "--root", str(base / "demo"), cwd=base, timeout=600)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    assert result.returncode == 0, result.stderr[-3000:]
    assert "3. newest windows in PostgreSQL (signal_windows)" in result.stdout
    reconciliation = next(line for line in result.stdout.splitlines() if "reconciliation" in line)
    assert "(ok)" in reconciliation and "dropped as too late" in reconciliation


def test_jvm_status_says_whether_sessions_map_the_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """make setup built this machine's archive; an empty cache has none to map."""
    built = streamsmith("jvm", "status", cwd=tmp_path, timeout=60)
    assert built.returncode == 0 and built.stdout.startswith("in use: "), built.stdout
    assert built.stdout.split()[2].endswith(".jsa")

    monkeypatch.setenv("STREAMSMITH_CACHE", str(tmp_path))
    empty = streamsmith("jvm", "status", cwd=tmp_path, timeout=60)
    removed = streamsmith("jvm", "remove", cwd=tmp_path, timeout=60)
    assert empty.returncode == 1
    assert f"not built: `streamsmith jvm build` writes {tmp_path}/jvm/spark-" in empty.stdout
    assert removed.stdout.strip() == f"removed 0 archive(s) from {tmp_path}/jvm"


def test_table_history_optimize_restore_and_vacuum_without_a_jvm(
    spark: SparkSession, tmp_path: Path
) -> None:
    from streamsmith.io.lake import table_path

    path = str(table_path(tmp_path, "balances"))
    for day in range(3):  # three appends: three versions of one small file each
        rows = [(f"k{day}", day)]
        spark.createDataFrame(rows, "key string, amount int").write.format("delta").mode(
            "append"
        ).save(path)
    root = ("--root", str(tmp_path))

    history = streamsmith("table", "history", "balances", *root, "--format", "json", cwd=tmp_path)
    optimized = streamsmith("table", "optimize", "balances", *root, cwd=tmp_path)
    after = streamsmith("table", "history", "balances", *root, "--format", "csv", cwd=tmp_path)
    restored = streamsmith("table", "restore", "balances", "--version", "1", *root, cwd=tmp_path)
    content = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    too_soon = streamsmith("table", "vacuum", "balances", "--retain-hours", "0", *root,
                           cwd=tmp_path)  # fmt: skip
    killed = Path(path) / "part-killed.parquet"  # a batch killed 8 days ago left it
    killed.write_bytes(b"never committed")
    os.utime(killed, (time.time() - 8 * 24 * 3600,) * 2)
    kept = streamsmith("table", "vacuum", "balances", "--dry-run", *root, cwd=tmp_path)
    unknown = streamsmith("table", "history", "nope", *root, cwd=tmp_path)

    versions = [json.loads(line) for line in history.stdout.splitlines()]
    assert [(v["version"], v["operation"]) for v in versions] == [
        (2, "WRITE"), (1, "WRITE"), (0, "WRITE")
    ]  # fmt: skip
    assert optimized.stdout.strip() == "balances: 3 files compacted into 1", optimized.stderr
    assert after.stdout.splitlines()[1].startswith("3,") and ",OPTIMIZE," in after.stdout
    assert restored.returncode == 0 and "restored version 1 as version 4" in restored.stdout
    assert content == [("k0", 0), ("k1", 1)]
    assert_user_error(too_soon, "vacuum balances")
    assert kept.stdout.splitlines() == [
        "balances: would delete 1 files unused for 168 hours", "  part-killed.parquet"
    ]  # fmt: skip
    assert killed.exists()
    assert_user_error(unknown, "no lake table 'nope'")
