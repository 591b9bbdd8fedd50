"""Sink formats: the registry, typed options checked by the plan, packages' own sinks."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamsmith.apps import get_app
from streamsmith.config import Trigger, load_spec
from streamsmith.errors import UserError
from streamsmith.io import sinks
from streamsmith.io.sinks import build_sink, builtin_formats, formats
from streamsmith.io.sinks.base import SinkContext
from streamsmith.runtime.checkpoints import compare
from streamsmith.runtime.describe import describe_plan
from streamsmith.runtime.plan import build_plan


def plan_with(tmp_path: Path, *sets: str) -> str:
    app = get_app("cloudtrail")
    spec = load_spec(app.default_spec, sets=sets, storage_root=str(tmp_path))
    return describe_plan(build_plan(app, spec, Trigger("available-now")))


def test_each_builtin_format_is_a_module_of_the_sinks_package() -> None:
    assert builtin_formats() == (
        "console", "delta", "foreach_batch", "kafka", "memory", "parquet", "postgres",
        "webhook",
    )  # fmt: skip
    for name in builtin_formats():
        assert sinks.sink_class(name).format == name
    with pytest.raises(UserError, match="unknown sink format 'parquett': choose one of console"):
        sinks.sink_class("parquett")


def test_switching_format_drops_the_defaults_keys_but_not_the_users(tmp_path: Path) -> None:
    plan = plan_with(tmp_path, "flows.cloudtrail_events.sink.format=console")
    assert "console (standard output, 20 rows a batch, truncated)" in plan
    with pytest.raises(UserError) as error:
        plan_with(tmp_path, "flows.cloudtrail_events.sink.key=[eventID]")
    message = str(error.value)
    assert "invalid key 'flows.cloudtrail_events.sink.key' in --set" in message
    assert "key is for postgres sinks, not delta" in message
    with pytest.raises(UserError, match="a console sink has no key 'rows'"):
        plan_with(tmp_path, "flows.cloudtrail_events.sink.format=console",
                  "flows.cloudtrail_events.sink.rows=5")  # fmt: skip
    with pytest.raises(UserError, match=r"'flows.cloudtrail_events.sink.num_rows' in --set: "):
        plan_with(tmp_path, "flows.cloudtrail_events.sink.format=console",
                  "flows.cloudtrail_events.sink.num_rows=0")  # fmt: skip


@pytest.fixture
def user_code(tmp_path: Path) -> Iterator[Path]:
    """A folder on sys.path for modules the tests write, removed afterwards."""
    folder = tmp_path / "user_code"
    folder.mkdir()
    sys.path.insert(0, str(folder))
    try:
        yield folder
    finally:
        sys.path.remove(str(folder))
        for name in [m for m in sys.modules if m.startswith("user_")]:
            del sys.modules[name]
        sinks._load.cache_clear()
        sinks._plugin_names.cache_clear()


def test_foreach_batch_functions_are_checked_before_spark_starts(
    tmp_path: Path, user_code: Path
) -> None:
    (user_code / "user_batches.py").write_text(
        "def keep(batch_df, batch_id, folder):\n    pass\n\nNOT_A_FUNCTION = 3\n"
    )
    fmt = "flows.cloudtrail_events.sink.format=foreach_batch"
    ok = plan_with(tmp_path, fmt, "flows.cloudtrail_events.sink.function=user_batches:keep",
                   "flows.cloudtrail_events.sink.options.folder=/x")  # fmt: skip
    assert "foreach_batch user_batches:keep(batch_df, batch_id)" in ok
    cases = {
        "user_nowhere:keep": "no module 'user_nowhere'",
        "user_batches:gone": "module 'user_batches' has no 'gone'",
        "user_batches:NOT_A_FUNCTION": "is a int, not a function",
        "user_batches": "must look like package.module:function",
    }
    for reference, message in cases.items():
        with pytest.raises(UserError, match=message) as error:
            plan_with(tmp_path, fmt, f"flows.cloudtrail_events.sink.function={reference}",
                      "flows.cloudtrail_events.sink.options.folder=/x")  # fmt: skip
        assert str(error.value).startswith("flows.cloudtrail_events.sink.function: ")
    with pytest.raises(UserError, match="cannot be called that way: missing a required argument"):
        plan_with(tmp_path, fmt, "flows.cloudtrail_events.sink.function=user_batches:keep")


def test_a_package_registers_its_own_sink_by_entry_point(tmp_path: Path, user_code: Path) -> None:
    (user_code / "user_sinks.py").write_text(
        "from streamsmith.io.sinks.base import Sink, SinkOptions\n"
        "class Opts(SinkOptions):\n    bucket: str\n"
        "class BucketSink(Sink):\n"
        "    format = 'bucket'\n    kind = 'bucket'\n    Options = Opts\n"
        "    @property\n    def target(self):\n        return self.options.bucket\n"
        "    def start(self, spark, frame, query):\n        raise NotImplementedError\n"
    )
    info = user_code / "user_sinks-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: user-sinks\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[streamsmith.sinks]\nbucket = user_sinks:BucketSink\n")
    sinks._plugin_names.cache_clear()

    assert "bucket" in formats()
    plan = plan_with(tmp_path, "flows.cloudtrail_events.sink.format=bucket",
                     "flows.cloudtrail_events.sink.bucket=raw")  # fmt: skip
    assert "bucket query cloudtrail.cloudtrail_events: bucket raw" in plan


def test_kafka_sinks_need_servers_and_a_topic(tmp_path: Path) -> None:
    spec = load_spec(get_app("cloudtrail").default_spec, storage_root=str(tmp_path))
    context = SinkContext(spec, "cloudtrail", "cloudtrail_events")
    with pytest.raises(UserError, match="flows.cloudtrail_events.sink has no Kafka servers"):
        build_sink("kafka", {"topic": "out"}, context)
    with pytest.raises(UserError, match="a kafka sink needs a topic"):
        build_sink("kafka", {"options": {"kafka.bootstrap.servers": "127.0.0.1:9"}}, context)


def _print(kind: str, family: str, **rules: bool) -> dict[str, object]:
    return {
        "query": "a.f",
        "source": {"format": "jsonl", "input": "/in"},
        "sink": {
            "kind": kind,
            "target": "/t",
            "mode": "append",
            "rules": {"family": family, "keeps_schema": False, "fixed_location": False, **rules},
        },
        "output_schema": [["a", "int"]],
        "stateful": [],
    }


def test_check_upgrade_applies_the_rules_each_sink_states() -> None:
    legacy = _print("table", "file")
    del legacy["sink"]["rules"]  # type: ignore[attr-defined]  # a version-1 fingerprint
    assert compare(legacy, _print("topic", "kafka")).resumable  # file sink -> Kafka
    assert not compare(_print("topic", "kafka"), _print("table", "file")).resumable
    assert compare(_print("postgres", "foreach"), _print("foreach_batch", "foreach")).resumable
    assert compare(_print("console", "rebuilt"), _print("table", "file")).resumable
    moved = _print("table", "file", fixed_location=True)
    moved["sink"]["target"] = "/elsewhere"  # type: ignore[index]
    verdict = compare(legacy, moved)
    assert not verdict.resumable and "the lake table moved" in verdict.summary
