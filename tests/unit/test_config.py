"""Spec loading, layering and the messages a user sees for a bad spec."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from streamsmith.apps import get_app
from streamsmith.apps.cloudtrail import DEFAULT_SPEC
from streamsmith.apps.ysb import kafka_overrides
from streamsmith.config import Trigger, load_spec, parse_duration, parse_trigger
from streamsmith.errors import UserError
from streamsmith.io.sinks import build_sink
from streamsmith.io.sinks.base import SinkContext
from streamsmith.monitor.recorder import spec_secrets
from streamsmith.runtime.describe import describe_plan
from streamsmith.runtime.plan import build_plan, check_inputs, check_storage_root
from streamsmith.spark.session import default_conf, local_cores


def test_default_spec_is_valid_and_lays_out_per_flow_checkpoints(tmp_path: Path) -> None:
    spec = load_spec(DEFAULT_SPEC, storage_root=str(tmp_path))
    plan = build_plan(get_app("cloudtrail"), spec)

    assert [o.query_name for o in plan.outputs] == [
        "cloudtrail.cloudtrail_events",
        "cloudtrail.cloudtrail_events.quarantine",
    ]
    assert [o.checkpoint for o in plan.outputs] == [
        tmp_path / "checkpoints/cloudtrail/cloudtrail_events",
        tmp_path / "checkpoints/cloudtrail/cloudtrail_events__quarantine",
    ]
    assert [o.path for o in plan.outputs] == [
        tmp_path / "tables/cloudtrail_events",
        tmp_path / "tables/cloudtrail_events_quarantine",
    ]
    assert plan.outputs[0].partition_by == ("date",)
    assert plan.outputs[0].trigger == Trigger("interval", 10.0)
    assert spec.source_path("cloudtrail_logs") == tmp_path / "input/cloudtrail"


def test_files_then_sets_override_defaults(tmp_path: Path) -> None:
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(
        "trigger: once\n"
        "sources:\n  cloudtrail_logs:\n    max_files_per_trigger: 5\n    path: /data/ct\n"
        "spark:\n  conf:\n    spark.sql.shuffle.partitions: 4\n"
    )
    spec = load_spec(
        DEFAULT_SPEC,
        [spec_file],
        [
            "sources.cloudtrail_logs.latest_first=true",
            "sources.cloudtrail_logs.max_files_per_trigger=7",
            "spark.conf.spark.sql.adaptive.enabled=false",
        ],
        storage_root=str(tmp_path),
    )
    source = spec.sources["cloudtrail_logs"]
    assert spec.trigger == "once"
    assert (source.max_files_per_trigger, source.latest_first, source.path) == (7, True, "/data/ct")
    assert source.format == "json"  # untouched default survives the merge
    assert spec.spark.conf == {
        "spark.sql.shuffle.partitions": 4,
        "spark.sql.adaptive.enabled": False,
    }
    assert spec.source_path("cloudtrail_logs") == Path("/data/ct")


def test_ysb_kafka_overrides_read_the_topic_as_the_typed_sets_do(tmp_path: Path) -> None:
    app = get_app("ysb")
    typed = load_spec(
        app.default_spec,
        sets=[
            "kafka.bootstrap_servers=127.0.0.1:9092",
            "sources.ads.format=kafka",
            "sources.ads.path=null",
            "sources.ads.options.subscribe=ads",
            "sources.ads.options.startingOffsets=earliest",
            "sources.ads.options.valueFormat=json",
        ],
        storage_root=str(tmp_path),
    )
    overrides = kafka_overrides("127.0.0.1:9092", "ads")
    spec = load_spec(app.default_spec, overrides=overrides, storage_root=str(tmp_path))
    assert spec.model_dump() == typed.model_dump()  # origins differ: files vs overrides
    assert spec.sources["ads"].path is None
    assert spec.sources["ads"].options["subscribe"] == "ads"


def test_dry_run_masks_kafka_secrets_by_key(tmp_path: Path) -> None:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required password="pw";'
    secrets = {
        "kafka.sasl.jaas.config": jaas,
        "kafka.ssl.key.password": "k3y",
        "kafka.sasl.oauthbearer.client.secret": "c1ient",
    }
    app = get_app("ysb")
    spec = load_spec(
        app.default_spec,
        overrides=kafka_overrides("127.0.0.1:9092", "ads"),
        sets=[f"sources.ads.options.{key}={json.dumps(value)}" for key, value in secrets.items()],
        storage_root=str(tmp_path),
    )
    text = describe_plan(build_plan(app, spec, Trigger("available-now")))
    assert "kafka.sasl.jaas.config=***" in text and "kafka.ssl.key.password=***" in text
    assert not [value for value in ('password="pw"', "k3y", "c1ient") if value in text]
    assert spec_secrets(spec)[-3:] == list(secrets.values())  # redacted from the event log


def test_unknown_key_names_the_key_and_the_file(tmp_path: Path) -> None:
    spec_file = tmp_path / "mine.yaml"
    spec_file.write_text("sources:\n  cloudtrail_logs:\n    max_file_per_trigger: 5\n")
    with pytest.raises(UserError) as caught:
        load_spec(DEFAULT_SPEC, [spec_file])
    message = str(caught.value)
    assert "unknown key 'sources.cloudtrail_logs.max_file_per_trigger'" in message
    assert str(spec_file) in message


def test_bad_values_name_their_origin() -> None:
    with pytest.raises(UserError, match=r"invalid value for 'trigger' in --set: invalid trigger"):
        load_spec(DEFAULT_SPEC, sets=["trigger=sometimes"])
    with pytest.raises(
        UserError, match=r"'sources.cloudtrail_logs.max_files_per_trigger' in --set"
    ):
        load_spec(DEFAULT_SPEC, sets=["sources.cloudtrail_logs.max_files_per_trigger=0"])
    with pytest.raises(UserError, match="must look like dotted.key=value"):
        load_spec(DEFAULT_SPEC, sets=["trigger"])
    with pytest.raises(UserError, match="reads source 'nowhere', which is neither a source"):
        load_spec(DEFAULT_SPEC, sets=["flows.cloudtrail_events.source=nowhere"])


def test_unreadable_spec_files(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        load_spec(DEFAULT_SPEC, [tmp_path / "missing.yaml"])
    broken = tmp_path / "broken.yaml"
    broken.write_text("sources: [unclosed\n")
    with pytest.raises(UserError, match="is not valid YAML"):
        load_spec(DEFAULT_SPEC, [broken])


def test_a_spec_nested_too_deep_is_a_user_error_naming_the_file(tmp_path: Path) -> None:
    from streamsmith.pipelines import load_pipeline

    deep = tmp_path / "streamsmith.yml"
    deep.write_text("name: deep\nsources: " + "[" * 10_000 + "]" * 10_000 + "\n")
    with pytest.raises(UserError, match=f"spec file {deep} nests too deep to read"):
        load_spec(DEFAULT_SPEC, [deep])
    with pytest.raises(UserError, match=f"spec file {deep} nests too deep to read"):
        load_pipeline(deep)
    with pytest.raises(UserError, match="--set sources: the value nests too deep"):
        load_spec(DEFAULT_SPEC, sets=["sources=" + "[" * 10_000 + "]" * 10_000])


@pytest.mark.parametrize("value", ["[a, b", "{spark: {master: local[2]", "a: b: c", "'open"])
def test_a_set_value_that_is_not_valid_yaml_fails_naming_the_key(value: str) -> None:
    with pytest.raises(UserError, match=r"--set spark\.conf: the value is not valid YAML"):
        load_spec(DEFAULT_SPEC, sets=[f"spark.conf={value}"])
    # Quoted, the same text is a string; plain words stay strings as YAML reads them.
    spec = load_spec(DEFAULT_SPEC, sets=["spark.conf.x='[a, b'", "spark.master=local[2]"])
    assert (spec.spark.conf["x"], spec.spark.master) == ("[a, b", "local[2]")


def test_storage_root_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("STREAMSMITH_ROOT", str(tmp_path / "env-root"))
    assert load_spec(DEFAULT_SPEC).root == tmp_path / "env-root"
    assert load_spec(DEFAULT_SPEC, storage_root=str(tmp_path / "cli")).root == tmp_path / "cli"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("available-now", Trigger("available-now")),
        ("availableNow", Trigger("available-now")),
        ("once", Trigger("once")),
        ("interval=10s", Trigger("interval", 10.0)),
        ("interval=500ms", Trigger("interval", 0.5)),
        ("interval=2 minutes", Trigger("interval", 120.0)),
        ("interval=0s", Trigger("interval", 0.0)),
    ],
)
def test_parse_trigger(text: str, expected: Trigger) -> None:
    assert parse_trigger(text) == expected


def test_trigger_errors_and_spark_arguments() -> None:
    with pytest.raises(ValueError, match="use available-now, once, interval=<duration>"):
        parse_trigger("continuous")
    with pytest.raises(ValueError, match="invalid duration '10 parsecs'"):
        parse_duration("10 parsecs")
    assert Trigger("interval", 0.5).spark_kwargs() == {"processingTime": "500 milliseconds"}
    assert Trigger("available-now").spark_kwargs() == {"availableNow": True}
    assert str(Trigger("interval", 10.0)) == "interval=10s"
    assert not Trigger("interval", 1.0).terminates and Trigger("once").terminates


def test_plan_checks_run_before_spark(tmp_path: Path) -> None:
    spec = load_spec(DEFAULT_SPEC, storage_root=str(tmp_path))
    plan = build_plan(get_app("cloudtrail"), spec, Trigger("available-now"))
    with pytest.raises(UserError, match="input directory .* of source 'cloudtrail_logs' does not"):
        check_inputs(plan)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(UserError, match="storage root .* is not writable"):
        check_storage_root(blocker / "root")
    text = describe_plan(plan)
    assert "checkpoint " + str(tmp_path / "checkpoints/cloudtrail/cloudtrail_events") in text
    assert "trigger available-now" in text


def test_disabled_and_unknown_flows(tmp_path: Path) -> None:
    app = get_app("cloudtrail")
    with pytest.raises(UserError, match="every flow of app 'cloudtrail' is disabled"):
        build_plan(app, load_spec(DEFAULT_SPEC, sets=["flows.cloudtrail_events.enabled=false"]))
    extra = load_spec(
        DEFAULT_SPEC, sets=["flows.other.source=cloudtrail_logs", "flows.other.sink.table=other"]
    )
    with pytest.raises(UserError, match="spec flow\\(s\\) other are not flows of app"):
        build_plan(app, extra)
    with pytest.raises(UserError, match="unknown app 'nope': choose one of actions, activity"):
        get_app("nope")


def test_session_defaults_for_this_machine() -> None:
    from streamsmith.config import SparkSpec

    assert local_cores("local[2]") == 2 and local_cores("spark://host:7077") is None
    conf = default_conf(SparkSpec(master="local[3]"))
    assert conf["spark.sql.shuffle.partitions"] == "3"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.sql.streaming.stateStore.providerClass"].endswith(
        "RocksDBStateStoreProvider"
    )
    assert "spark.driver.bindAddress" not in default_conf(SparkSpec(master="spark://h:7077"))


def test_live_session_keeps_the_generated_code_of_a_run(spark: SparkSession) -> None:
    """Spark's cache of generated classes is static: set when the session starts, to 1,000
    classes (Spark keeps 100; a run's queries and Delta commits use several hundred)."""
    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == "1000"


def test_kafka_sources_are_validated(tmp_path: Path) -> None:
    from streamsmith.config import SourceSpec

    spec = SourceSpec(
        format="kafka",
        options={"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "events"},
    )
    assert not spec.is_file_source and spec.connector == "auto"
    kafka_spec = {
        "app": "k",
        "sources": {"s": {"format": "kafka", "options": {"subscribe": "events"}}},
        "flows": {"f": {"source": "s", "sink": {"format": "kafka", "topic": "out"}}},
    }
    with pytest.raises(UserError, match="sources.s has no Kafka servers: set kafka.bootstrap"):
        load_spec(kafka_spec)
    shared = load_spec(kafka_spec, sets=["kafka.bootstrap_servers=127.0.0.1:9"])
    assert shared.kafka_options({"subscribe": "events"}) == {
        "kafka.bootstrap.servers": "127.0.0.1:9",
        "subscribe": "events",
    }
    with pytest.raises(UserError, match="a kafka sink needs a topic"):  # checked by the plan
        build_sink("kafka", {"table": "t"}, SinkContext(shared, "k", "f"))
    with pytest.raises(ValueError, match="exactly one of subscribe, subscribePattern, assign"):
        SourceSpec(format="kafka", options={"kafka.bootstrap.servers": "x:1"})
    with pytest.raises(ValueError, match="use options.maxOffsetsPerTrigger for kafka"):
        SourceSpec(
            format="kafka",
            max_files_per_trigger=3,
            options={"kafka.bootstrap.servers": "x:1", "subscribe": "t"},
        )
    with pytest.raises(ValueError, match="a jsonl source needs a path"):
        SourceSpec(format="jsonl")


def test_adaptive_file_batches_need_a_larger_cap() -> None:
    with pytest.raises(UserError, match="needs max_files_per_trigger at least as large"):
        load_spec(DEFAULT_SPEC, sets=["sources.cloudtrail_logs.min_files_per_trigger=50"])
    spec = load_spec(DEFAULT_SPEC, sets=["sources.cloudtrail_logs.min_files_per_trigger=2"])
    plan = build_plan(get_app("cloudtrail"), spec)
    assert "adaptive maxFilesPerTrigger 2..20" in describe_plan(plan)


def test_chained_flows_know_their_upstream_and_webhook_urls_are_checked(tmp_path: Path) -> None:
    app = get_app("secops")
    sets = ["flows.alert_webhook.enabled=true", "flows.alert_webhook.sink.url=http://127.0.0.1:9"]
    spec = load_spec(app.default_spec, sets=sets, storage_root=str(tmp_path))
    plan = build_plan(app, spec, Trigger("available-now"))
    upstream = {flow.name: plan.upstream(flow) for flow in plan.flows}
    assert upstream["alert_webhook"] == {"alerts"}  # it reads the alerts table
    assert all(not names for flow, names in upstream.items() if flow != "alert_webhook")
    for bad in ("ftp://hooks.example/x", "hooks.example/x", "http://"):
        with pytest.raises(UserError, match="url must be an http:// or https:// URL with a host"):
            bad_url = [*sets[:1], f"flows.alert_webhook.sink.url={bad}"]
            build_plan(app, load_spec(app.default_spec, sets=bad_url, storage_root=str(tmp_path)))


def test_queries_reading_one_kafka_source_share_its_ranges() -> None:
    app = get_app("ysb")
    kafka = [
        "kafka.bootstrap_servers=127.0.0.1:9",
        "sources.ads.format=kafka",
        "sources.ads.path=null",
        "sources.ads.options.subscribe=ads",
    ]
    both = load_spec(app.default_spec, sets=[*kafka, "flows.campaign_windows_pg.enabled=true"])
    plan = build_plan(app, both, Trigger("available-now"))
    assert not any(
        key.startswith("rangeCache") for key in build_plan(app, both).flows[0].source.options
    )
    # The lake flow's table and the PostgreSQL flow read every range; the lake flow's
    # quarantine and late-events queries may skip theirs, so they read uncounted.
    assert [(f.source.options["rangeCache"], f.source.options["rangeCacheReaders"])
            for f in plan.flows] == [("ysb.ads", 2), ("ysb.ads", 2)]  # fmt: skip
    alone = load_spec(app.default_spec, sets=kafka)
    assert not any(
        key.startswith("rangeCache")
        for key in build_plan(app, alone, Trigger("available-now")).flows[0].source.options
    )  # one counted reader: nothing to share

    own = load_spec(app.default_spec, sets=[*kafka, "sources.ads.options.rangeCache=off"])
    own_plan = build_plan(app, own, Trigger("available-now"))
    assert own_plan.flows[0].source.options["rangeCache"] is False  # YAML: off
    files = build_plan(app, load_spec(app.default_spec), Trigger("available-now"))
    assert not any(key.startswith("rangeCache") for key in files.flows[0].source.options)


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        # The lake flow keeps the quarantine and late events of both flows ...
        (
            ["flows.campaign_windows_pg.enabled=true"],
            ["ysb.campaign_windows.quarantine", "ysb.campaign_windows.late"],
        ),
        # ... and when it is switched off, the PostgreSQL flow takes them over.
        (
            ["flows.campaign_windows.enabled=false", "flows.campaign_windows_pg.enabled=true"],
            ["ysb.campaign_windows_pg.quarantine", "ysb.campaign_windows_pg.late"],
        ),
    ],
)
def test_a_disabled_flows_quarantine_moves_to_a_sibling(
    tmp_path: Path, sets: list[str], expected: list[str]
) -> None:
    app = get_app("ysb")
    spec = load_spec(app.default_spec, sets=sets, storage_root=str(tmp_path))
    plan = build_plan(app, spec, Trigger("available-now"))
    companions = [o for o in plan.outputs if o.kind in ("quarantine", "late")]
    assert [o.query_name for o in companions] == expected
    assert [o.table for o in companions] == ["campaign_windows_quarantine", "campaign_windows_late"]


@pytest.mark.parametrize(
    ("trigger", "side_interval", "expected"),
    [
        (Trigger("interval", 1.0), "5s", "interval=5s"),  # side queries run less often
        (Trigger("interval", 10.0), "5s", "interval=10s"),  # never more often than the flow
        (Trigger("interval", 1.0), "1s", "interval=1s"),
        (Trigger("interval", 0.0), "5s", "interval=0s"),  # as fast as possible: follow
        (Trigger("available-now"), "5s", "available-now"),  # catch-up: same trigger
    ],
)
def test_side_queries_run_at_the_slower_of_the_flow_and_side_interval(
    tmp_path: Path, trigger: Trigger, side_interval: str, expected: str
) -> None:
    app = get_app("ysb")
    spec = load_spec(app.default_spec, sets=[f"side_interval={side_interval}"],
                     storage_root=str(tmp_path))  # fmt: skip
    plan = build_plan(app, spec, trigger)
    assert {str(o.trigger) for o in plan.outputs if o.kind == "table"} == {str(trigger)}
    assert {str(o.trigger) for o in plan.outputs if o.kind in ("quarantine", "late")} == {expected}


def test_side_interval_must_be_a_duration() -> None:
    app = get_app("ysb")
    with pytest.raises(UserError, match="side_interval"):
        load_spec(app.default_spec, sets=["side_interval=soon"])


@pytest.mark.parametrize("name", ["../../../x", "a/b", "", "bad name"])
def test_a_source_name_is_an_identifier_not_a_path(name: str) -> None:
    document = {
        "app": "x",
        "sources": {name: {"format": "text", "path": "in"}},
        "flows": {"f": {"source": name, "sink": {"table": "t"}}},
    }
    with pytest.raises(UserError, match=f"source name {name!r} must be an identifier"):
        load_spec(document)


def test_file_reader_options_are_checked_per_format_without_case() -> None:
    from streamsmith.config.file_options import json_parse_options, unknown_file_options

    assert unknown_file_options("jsonl", {"TimestampFormat": "yyyy", "allowComments": True}) is None
    assert unknown_file_options("csv", {"header": True, "encoding": "ISO-8859-1"}) is None
    problem = unknown_file_options("jsonl", {"multiLine": True, "header": True})
    assert problem is not None
    assert problem.startswith("a jsonl source has no option(s) header, multiLine (its options: ")
    assert unknown_file_options("parquet", {"mergeSchema": True}) == (
        "a parquet source has no option(s) mergeSchema (its options: none)"
    )
    # Only the JSON parsing ones reach from_json, spelt as Spark spells them.
    assert json_parse_options({"timestampformat": "yyyy/MM/dd", "allowComments": True}) == {
        "timestampFormat": "yyyy/MM/dd",
        "allowComments": "true",
    }
