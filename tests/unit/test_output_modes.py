"""Output modes, sinks and watermarks: invalid combinations fail before Spark starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamsmith.apps import get_app
from streamsmith.config import Trigger, load_spec
from streamsmith.errors import UserError
from streamsmith.runtime.describe import describe_plan
from streamsmith.runtime.plan import Plan, build_plan


def plan_of(app_name: str, root: Path, *sets: str, trigger: Trigger | None = None) -> Plan:
    app = get_app(app_name)
    return build_plan(app, load_spec(app.default_spec, sets=sets, storage_root=str(root)), trigger)


def test_stateful_apps_lay_out_postgres_memory_quarantine_and_late_outputs(tmp_path: Path) -> None:
    plan = plan_of("signals", tmp_path)

    assert [(o.query_name, o.kind, o.table, o.output_mode) for o in plan.outputs] == [
        ("signals.device_averages", "postgres", "device_averages", "update"),
        ("signals.signal_windows", "postgres", "signal_windows", "update"),
        ("signals.signal_windows.final", "table", "signal_windows_final", "append"),
        ("signals.signal_windows.live", "memory", "signal_windows_live", "complete"),
        ("signals.signal_windows.quarantine", "quarantine", "signal_windows_quarantine", "append"),
        ("signals.signal_windows.late", "late", "signal_windows_late", "append"),
    ]
    assert plan.outputs[3].checkpoint == tmp_path / "checkpoints/signals/signal_windows__live"
    late = plan.outputs[5]
    assert late.path == tmp_path / "tables/signal_windows_late"
    assert late.checkpoint == tmp_path / "checkpoints/signals/signal_windows__late"
    assert plan.outputs[1].sink.options.key == ("deviceId", "window_start", "window_end")


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            [
                "flows.signal_windows.sinks.final.format=parquet",
                "flows.signal_windows.sinks.final.output_mode=update",
            ],
            "a parquet sink takes output mode append, not update",
        ),
        (  # the default, delta, takes update mode on the columns it merges on
            ["flows.signal_windows.sinks.final.output_mode=update"],
            "an update-mode delta sink merges each row on its keys: set sink.keys",
        ),
        (
            [
                "flows.device_averages.sink.format=memory",
                "flows.device_averages.sink.key=[]",
                "flows.device_averages.sink.output_mode=append",
            ],
            "flow 'device_averages' of app 'signals': append mode on an aggregation needs a "
            "watermark",
        ),
    ],
)
def test_invalid_mode_combinations_are_rejected(
    tmp_path: Path, sets: list[str], message: str
) -> None:
    with pytest.raises(UserError, match=message):
        plan_of("signals", tmp_path, *sets)


def test_complete_mode_needs_an_aggregation(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="complete mode rewrites the whole result every batch"):
        plan_of(
            "nest",
            tmp_path,
            "flows.camera_events.sink.format=memory",
            "flows.camera_events.sink.partition_by=[]",
            "flows.camera_events.sink.output_mode=complete",
        )


def test_sink_options_belong_to_their_format(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="key is for postgres sinks"):
        plan_of("signals", tmp_path, "flows.signal_windows.sinks.final.key=[deviceId]")
    with pytest.raises(UserError, match="partition_by is for delta and parquet sinks"):
        plan_of("signals", tmp_path, "flows.signal_windows.sinks.serving.partition_by=[deviceId]")


def test_unbounded_state_warns_in_always_on_runs_only(tmp_path: Path) -> None:
    always_on = plan_of("signals", tmp_path)
    catch_up = plan_of("signals", tmp_path, trigger=Trigger("available-now"))

    assert [w.split(":")[0] for w in always_on.warnings] == [
        "flow 'device_averages' of app 'signals' aggregates without a watermark in an "
        "always-on run",
        "flow 'signal_windows' (sink live) of app 'signals' runs in complete mode",
    ]
    assert catch_up.warnings == ()
    assert "warning: flow 'device_averages'" in describe_plan(always_on)


def test_dry_run_never_shows_the_postgres_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMSMITH_PG_DSN", "host=db.example user=app password=s3cret")
    from_env = describe_plan(plan_of("actions", tmp_path))
    from_spec = describe_plan(
        plan_of("actions", tmp_path, "postgres.dsn=postgresql://app:s3cret@db.example/x")
    )

    assert (
        "postgres table public.action_counts (key action, window_start, window_end) "
        "on $STREAMSMITH_PG_DSN" in from_env
    )
    assert "on postgres.dsn in the spec" in from_spec
    assert "s3cret" not in from_env + from_spec
    spec = load_spec(
        get_app("actions").default_spec, sets=["postgres.dsn=postgresql://app:s3cret@h/x"]
    )
    assert "s3cret" not in repr(spec) + str(spec.model_dump())
