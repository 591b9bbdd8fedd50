"""``trigger: real-time``: what Spark 4.2 runs in Real-time Mode is planned, the rest
refused before Spark starts, in one line naming the source, sink or operator."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from streamsmith.apps import get_app
from streamsmith.config import Trigger, load_spec, parse_trigger
from streamsmith.errors import UserError
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.describe import describe_plan
from streamsmith.runtime.plan import Plan, build_plan

SQL = "SELECT user AS key, to_json(struct(user, ms)) AS value FROM clicks WHERE ms > 10"


def document(**changes: Any) -> dict[str, Any]:
    flow = {
        "source": "clicks",
        "sql": SQL,
        "sink": {"format": "kafka", "topic": "fast-clicks"},
        **changes.pop("flow", {}),
    }
    source = {
        "format": "kafka",
        "options": {"subscribe": "clicks"},
        "schema": "user string, ts timestamp, ms int",
        **changes.pop("source", {}),
    }
    return {
        "name": "clicks",
        "storage_root": "data",
        "trigger": "real-time",
        "kafka": {"bootstrap_servers": "127.0.0.1:9092"},
        "sources": {"clicks": source},
        "flows": {"fast": flow},
        **changes,
    }


def plan_for(tmp_path: Path, doc: dict[str, Any]) -> Plan:
    path = tmp_path / "streamsmith.yml"
    path.write_text(yaml.safe_dump(doc))
    app, spec = load_pipeline(path)
    return build_plan(app, spec)


def test_real_time_trigger_parses_with_its_checkpoint_interval() -> None:
    assert parse_trigger("real-time") == Trigger("real-time", 60.0)
    assert parse_trigger("real_time=10s") == Trigger("real-time", 10.0)
    assert str(parse_trigger("real-time=10s")) == "real-time=10s"
    assert parse_trigger("real-time=10s").spark_kwargs() == {"realTime": "10000 milliseconds"}
    assert not parse_trigger("real-time").terminates
    with pytest.raises(ValueError, match=r"real-time\[=<checkpoint interval>\]"):
        parse_trigger("real-time-please")
    with pytest.raises(ValueError, match="invalid duration 'soon'"):
        parse_trigger("realtime=soon")


def test_a_kafka_to_kafka_filter_runs_in_update_mode_with_a_dead_letter_topic(
    tmp_path: Path,
) -> None:
    plan = plan_for(tmp_path, document())
    # The quarantine query writes to the dead-letter topic, in micro-batches at the side
    # queries' interval; no late-events query.
    [output, letters] = plan.outputs
    assert (output.role, output.output_mode, str(output.trigger)) == (
        "main",
        "update",
        "real-time=60s",
    )
    assert (letters.role, letters.kind, letters.table, letters.output_mode) == (
        "quarantine",
        "dead-letter",
        "fast-clicks.dead-letter",
        "append",
    )
    assert (str(letters.trigger), letters.checkpoint.name) == ("interval=5s", "fast__quarantine")
    text = describe_plan(plan)
    assert "trigger real-time=60s" in text
    assert "dead-letter query clicks.fast.quarantine: kafka topic fast-clicks.dead-letter" in text


def test_the_sink_names_its_dead_letter_topic_and_a_flow_its_trigger(tmp_path: Path) -> None:
    sink = {"format": "kafka", "topic": "fast-clicks", "dead_letter_topic": "clicks-rejected"}
    doc = document(trigger="interval=1s", flow={"sink": sink, "trigger": "real-time=30s"})
    [output, letters] = plan_for(tmp_path, doc).outputs
    assert (letters.table, output.trigger) == ("clicks-rejected", Trigger("real-time", 30))


@pytest.mark.parametrize(
    ("changes", "refusal"),
    [
        (
            {"flow": {"sink": {"format": "postgres", "table": "fast", "key": ["key"]}}},
            r"its postgres sink \(postgres fast\) writes micro-batches",
        ),
        (
            {"flow": {"sink": {"table": "fast"}}},
            r"its delta sink \(table fast\) writes micro-batches; Real-time Mode writes to Kafka",
        ),
        (
            {"source": {"format": "jsonl", "path": "in", "options": {}}},
            "source 'clicks' is jsonl: Real-time Mode reads Kafka only",
        ),
        (
            {"source": {"connector": "python"}},
            "source 'clicks' reads with streamsmith's Python Kafka connector",
        ),
        (
            {"source": {"options": {"subscribe": "clicks", "valueFormat": "json"}}},
            "option valueFormat needs streamsmith's Python Kafka connector",
        ),
        (
            {"source": {"options": {"subscribe": "clicks", "maxOffsetsPerTrigger": 100}}},
            "option maxOffsetsPerTrigger sizes micro-batches",
        ),
        (
            {
                "flow": {
                    "sql": "SELECT window.start AS key, CAST(count(*) AS string) AS value "
                    "FROM clicks GROUP BY window",
                    "event_time": {"column": "ts", "lateness": "1 minute", "window": "1 minute"},
                }
            },
            "it aggregates .* only from 4.3",
        ),
        (
            {"flow": {"sink": {"format": "kafka", "topic": "t", "connector": "python"}}},
            "its kafka sink writes with streamsmith's Python connector",
        ),
        (
            {"flow": {"sink": {"format": "kafka", "topic": "t", "value_format": "avro"}}},
            "its kafka sink encodes Avro values",
        ),
        ({"trigger": "real-time=2s"}, "at most every 5000 ms"),
    ],
)
def test_what_spark_cannot_run_in_real_time_is_refused_naming_it(
    tmp_path: Path, changes: dict[str, Any], refusal: str
) -> None:
    with pytest.raises(UserError, match="flow 'fast' of app 'clicks' has trigger real-time") as err:
        plan_for(tmp_path, document(**changes))
    assert len(str(err.value).splitlines()) == 1
    assert re.search(refusal, str(err.value)), str(err.value)


def test_a_lower_minimum_from_the_spark_conf_allows_shorter_checkpoints(tmp_path: Path) -> None:
    conf = {"spark.sql.streaming.realTimeMode.minBatchDuration": "1000"}
    doc = document(trigger="real-time=1s", spark={"conf": conf})
    assert plan_for(tmp_path, doc).outputs[0].trigger == Trigger("real-time", 1.0)


def test_the_how_to_pipeline_turns_real_time_by_its_trigger_alone(tmp_path: Path) -> None:
    page = Path(__file__).parents[2] / "docs/how-to/real-time.md"
    blocks = re.findall(r"```yaml\n(.*?)```", page.read_text(), flags=re.DOTALL)
    micro = plan_for(tmp_path, yaml.safe_load(blocks[0]))
    assert [(o.role, str(o.trigger)) for o in micro.outputs] == [
        ("main", "interval=1s"),
        ("quarantine", "interval=5s"),
    ]
    changed = {**yaml.safe_load(blocks[0]), **yaml.safe_load(blocks[1])}
    [output, letters] = plan_for(tmp_path, changed).outputs
    assert (str(output.trigger), letters.table) == ("real-time=60s", "ad-views.dead-letter")
    shown = re.search(r"```\n(  topic query .*?)```", page.read_text(), flags=re.DOTALL)
    assert shown is not None
    for line in shown.group(1).splitlines():
        assert line.replace(str(tmp_path / "data"), "") in describe_plan(
            plan_for(tmp_path, changed)
        )


def test_the_secops_alerts_are_refused_in_real_time_as_its_page_says(tmp_path: Path) -> None:
    app = get_app("secops")
    spec = load_spec(
        app.default_spec, sets=["flows.alerts.trigger=real-time"], storage_root=str(tmp_path)
    )
    with pytest.raises(UserError) as err:
        build_plan(app, spec)
    page = (Path(__file__).parents[2] / "docs/apps/secops.md").read_text()
    assert f"error: {err.value}" in page
