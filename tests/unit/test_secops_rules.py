"""The security platform's generator and detection rules, without a streaming query:
pure rule functions directly, the processors under TwsTester (timers and state)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pandas as pd
from pyspark.sql.streaming.tws_tester import TwsTester

from streamsmith.generate.secops import NEW_DEVICE_MAC, secops_data
from streamsmith.stateful.detection import (
    DeviceWatch,
    FailedLogins,
    alert_id,
    count_failures,
    watch_device,
)
from streamsmith.stateful.leases import LeaseTracker, track

T0 = datetime(2026, 11, 20, 8, tzinfo=UTC)
MINUTE = 60_000


def ms(seconds: float) -> int:
    return int((T0 + timedelta(seconds=seconds)).timestamp() * 1000)


def valid(line: bytes) -> dict[str, object] | None:
    """A generated line's record; None for a line the generator cut short."""
    try:
        return dict(json.loads(line))
    except json.JSONDecodeError:
        return None


def test_the_generator_is_reproducible_and_its_ground_truth_follows_the_leases() -> None:
    data, again = secops_data(seed=3), secops_data(seed=3)
    assert data.chunks == again.chunks
    assert [(i.rule, i.entity) for i in data.incidents] == [
        ("device_offline", f"mac:{data.assets[7][0]}"),
        ("new_device", f"mac:{NEW_DEVICE_MAC}"),
        ("brute_force", "user:user-03"),
        ("brute_force", "src_ip:203.0.113.7"),
        ("brute_force", "src_ip:198.51.100.9"),
        ("anomaly", "src_ip:10.20.0.15"),
    ]
    auth = [r for r in map(valid, data.lines("auth")) if r and r["event_id"] in data.holders]
    assert len(auth) == data.events["auth"] == len(data.holders)
    from_seven = {r["event_id"]: r for r in auth if r["src_ip"] == "10.20.0.17"}
    owners = {data.holders[e] for e in from_seven}
    assert owners == {data.assets[7][0], NEW_DEVICE_MAC}  # the IP changed hands once
    switch = next(i.start for i in data.incidents if i.rule == "new_device")
    for event_id, record in from_seven.items():
        before = datetime.fromisoformat(record["event_time"].replace("Z", "+00:00")) < switch
        assert data.holders[event_id] == (data.assets[7][0] if before else NEW_DEVICE_MAC)
    outside = [
        e for e, r in ((r["event_id"], r) for r in auth) if r["src_ip"].startswith(("203.", "198."))
    ]
    assert all(data.holders[e] is None for e in outside) and len(outside) == 40 + 20


def test_a_burst_of_failures_raises_one_alert_thanks_to_the_cooldown() -> None:
    burst = [(ms(3 * n), "203.0.113.7") for n in range(40)]
    keep, alerts, until = count_failures(
        [], burst, entity="user:u", threshold=10, window_ms=5 * MINUTE,
        cooldown_until_ms=0, cooldown_ms=30 * MINUTE,
    )  # fmt: skip
    assert len(alerts) == 1
    alert = alerts[0]
    assert (alert.first_seen_ms, alert.last_seen_ms) == (ms(0), ms(27))  # the 10th failure
    assert alert.evidence == {"failures": 10, "distinct": 1, "within_minutes": 5.0}
    assert until == ms(27) + 30 * MINUTE
    assert len(keep) == 40  # all within the window of the newest


def test_failures_spread_wider_than_the_window_raise_nothing() -> None:
    spread = [(ms(40 * n), f"10.0.0.{n}") for n in range(20)]  # 7.5 per 5 minutes
    keep, alerts, _ = count_failures(
        [], spread, entity="user:u", threshold=10, window_ms=5 * MINUTE,
        cooldown_until_ms=0, cooldown_ms=30 * MINUTE,
    )  # fmt: skip
    assert alerts == []
    assert [at for at, _ in keep] == [ms(40 * n) for n in range(12, 20)]  # older ones forgotten


def test_alert_ids_are_deterministic() -> None:
    assert alert_id("brute_force", "user:u", 1) == alert_id("brute_force", "user:u", 1)
    assert alert_id("brute_force", "user:u", 1) != alert_id("brute_force", "user:u", 2)


def failures(*seconds: float, entity: str = "user:u") -> pd.DataFrame:
    return pd.DataFrame(
        {
            "entity": [entity] * len(seconds),
            "event_time": [pd.Timestamp(T0 + timedelta(seconds=s)) for s in seconds],
            "other": ["203.0.113.7"] * len(seconds),
            "failed": [True] * len(seconds),
        }
    )


def event_time_tester(processor: object) -> TwsTester:
    return TwsTester(
        processor,
        timeMode="EventTime",
        outputMode="Append",
        eventTimeExtractor=lambda row: int(pd.Timestamp(row["event_time"]).timestamp() * 1000),
    )


def test_brute_force_state_is_cleared_by_its_timer() -> None:
    run = event_time_tester(FailedLogins(3, 5 * MINUTE, 30 * MINUTE))
    first = run.testInPandas("user:u", failures(0, 10, 20, 30))
    assert first["rule"].tolist() == ["brute_force"]
    again = run.testInPandas("user:u", failures(60, 70, 80))  # still cooling down
    assert len(again) == 0
    assert run.peekValueState("cooldown", "user:u") == (ms(20) + 30 * MINUTE,)
    run.setWatermark(ms(20) + 30 * MINUTE)
    assert run.peekValueState("cooldown", "user:u") is None
    assert run.peekListState("failures", "user:u") == []


def dhcp(*events: tuple[float, str], mac: str = "m1", known: bool = True) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "mac": [mac] * len(events),
            "event_time": [pd.Timestamp(T0 + timedelta(seconds=s)) for s, _ in events],
            "action": [action for _, action in events],
            "ip": ["10.20.0.17"] * len(events),
            "hostname": ["ws-07"] * len(events),
            "known": [known] * len(events),
        }
    )


def test_a_silent_device_is_reported_once_by_a_timer_and_a_release_is_not() -> None:
    silence = 25 * MINUTE
    run = event_time_tester(DeviceWatch(silence))
    assert len(run.testInPandas("m1", dhcp((0, "assign"), (600, "renew")))) == 0
    assert len(run.setWatermark(ms(600) + silence - 1)) == 0
    fired = run.setWatermark(ms(600) + silence)
    assert fired[["rule", "entity"]].values.tolist() == [["device_offline", "mac:m1"]]
    assert fired["first_seen"][0] == pd.Timestamp(ms(600), unit="ms", tz="UTC")
    back = run.testInPandas("m1", dhcp((3600, "assign")))  # back, but already reported
    assert len(back) == 0
    leaving = event_time_tester(DeviceWatch(silence))
    leaving.testInPandas("m2", dhcp((0, "assign"), (300, "release"), mac="m2"))
    assert len(leaving.setWatermark(ms(300) + 2 * silence)) == 0


def test_only_an_unknown_mac_is_a_new_device() -> None:
    device, alerts = watch_device(None, [(ms(0), "assign", "10.0.0.1", "x", True)],
                                  mac="m", silence_ms=MINUTE)  # fmt: skip
    assert alerts == [] and device == (ms(0), False, "10.0.0.1", "x")
    _, alerts = watch_device(None, [(ms(0), "assign", "10.0.0.1", "x", False),
                                    (ms(30), "renew", "10.0.0.1", "x", False)],
                             mac="m", silence_ms=MINUTE)  # fmt: skip
    assert [a.rule for a in alerts] == ["new_device"]


def lease_events(*events: tuple[float, str, str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ip": ["10.20.0.17"] * len(events),
            "event_time": [pd.Timestamp(T0 + timedelta(seconds=s)) for s, _, _ in events],
            "action": [action for _, action, _ in events],
            "mac": [mac for _, _, mac in events],
            "hostname": [f"host-{mac}" for _, _, mac in events],
            "lease_seconds": [0 if action == "release" else 1200 for _, action, _ in events],
        }
    )


def test_leases_are_extended_by_renewals_and_closed_by_release_reassignment_or_expiry() -> None:
    lease, closed = track(None, [(ms(0), "assign", "a", "ha", 1200),
                                 (ms(600), "renew", "a", "ha", 1200)])  # fmt: skip
    assert closed == [] and lease == ("a", "ha", ms(0), ms(1800))
    lease, closed = track(lease, [(ms(700), "assign", "b", "hb", 1200)])  # a server reassigns
    assert closed == [(("a", "ha", ms(0), ms(700)), "reassigned")]
    lease, closed = track(lease, [(ms(800), "release", "b", "hb", 0)])
    assert lease is None and closed == [(("b", "hb", ms(700), ms(800)), "released")]
    lease, closed = track(("a", "ha", ms(0), ms(1200)), [(ms(1300), "assign", "c", "hc", 1200)])
    assert closed == [(("a", "ha", ms(0), ms(1200)), "expired")]


def test_an_expired_lease_is_closed_by_its_timer_which_clears_the_state() -> None:
    run = event_time_tester(LeaseTracker())
    out = run.testInPandas("10.20.0.17", lease_events((0, "assign", "a"), (600, "renew", "a")))
    assert len(out) == 0
    assert run.peekValueState("lease", "10.20.0.17") == ("a", "host-a", ms(0), ms(1800))
    assert len(run.setWatermark(ms(1800) - 1)) == 0
    expired = run.setWatermark(ms(1800))
    assert expired[["mac", "ended_by"]].values.tolist() == [["a", "expired"]]
    assert run.peekValueState("lease", "10.20.0.17") is None  # state bounded by live leases
