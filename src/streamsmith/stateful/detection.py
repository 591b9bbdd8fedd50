"""Detection rules as stateful processors (``transformWithStateInPandas``), one alert schema.

- :class:`FailedLogins` (``brute_force``): at least ``threshold`` failed logins of one
  entity (a user, or a source IP) within ``window``. After an alert the entity is quiet
  for ``cooldown``, so one attack raises one alert, not one per failure.
- :class:`DeviceWatch`: ``new_device`` on the first event of a MAC the asset inventory
  does not know; ``device_offline`` when a device that did not release its lease has
  been silent for ``silence`` (an event-time timer).

State stays bounded: a failure is forgotten once it is older than the window, and an
entity's state is cleared by a timer once its window and cooldown have passed. A device
keeps one small row (it must not look new when it comes back). Alert ids are hashes of
the rule, the entity and the evidence's first time, so a replayed batch re-raises the
same ids and sinks keyed on them keep one copy.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

from streamsmith.schemas.security import ALERT_SCHEMA
from streamsmith.stateful import millis, move_timer, timestamps


@dataclass(frozen=True)
class Alert:
    """One alert, as rows of ``ALERT_SCHEMA`` carry it (times in epoch milliseconds)."""

    rule: str
    severity: str
    entity: str
    window_start_ms: int
    window_end_ms: int
    evidence: dict[str, Any]
    first_seen_ms: int
    last_seen_ms: int

    @property
    def alert_id(self) -> str:
        return alert_id(self.rule, self.entity, self.first_seen_ms)


def alert_id(rule: str, entity: str, first_seen_ms: int) -> str:
    """Deterministic: the same evidence always gives the same id."""
    return hashlib.sha256(f"{rule}|{entity}|{first_seen_ms}".encode()).hexdigest()[:24]


def alert_frame(alerts: list[Alert]) -> pd.DataFrame:
    """Alerts as rows of ``ALERT_SCHEMA``; typed even when empty (Arrow needs it)."""

    return pd.DataFrame(
        {
            "alert_id": pd.Series([a.alert_id for a in alerts], dtype=object),
            "rule": pd.Series([a.rule for a in alerts], dtype=object),
            "severity": pd.Series([a.severity for a in alerts], dtype=object),
            "entity": pd.Series([a.entity for a in alerts], dtype=object),
            "window_start": timestamps([a.window_start_ms for a in alerts]),
            "window_end": timestamps([a.window_end_ms for a in alerts]),
            "evidence": pd.Series(
                [json.dumps(a.evidence, sort_keys=True) for a in alerts], dtype=object
            ),
            "first_seen": timestamps([a.first_seen_ms for a in alerts]),
            "last_seen": timestamps([a.last_seen_ms for a in alerts]),
        }
    )[ALERT_SCHEMA.fieldNames()]


# ---------------------------------------------------------------------------------------
# Brute force

FAILURE_STATE = StructType([StructField("at_ms", LongType()), StructField("other", StringType())])
COOLDOWN_STATE = StructType([StructField("until_ms", LongType())])

Failure = tuple[int, str]  # time in ms, the other side (source IP of a user, or user)


def count_failures(
    recent: list[Failure],
    new: list[Failure],
    *,
    entity: str,
    threshold: int,
    window_ms: int,
    cooldown_until_ms: int,
    cooldown_ms: int,
) -> tuple[list[Failure], list[Alert], int]:
    """Add failures in time order; return what to remember, the alerts, and the new
    end of the cooldown. Pure, so the rule is tested without Spark."""
    window = sorted(recent)
    alerts: list[Alert] = []
    for at_ms, other in sorted(new):
        window.append((at_ms, other))
        window.sort()
        inside = [f for f in window if at_ms - window_ms < f[0] <= at_ms]
        if len(inside) >= threshold and at_ms >= cooldown_until_ms:
            first = inside[0][0]
            evidence = {
                "failures": len(inside),
                "distinct": len({o for _, o in inside}),
                "within_minutes": window_ms / 60_000,
            }
            alerts.append(
                Alert("brute_force", "high", entity, first, at_ms, evidence, first, at_ms)
            )
            cooldown_until_ms = at_ms + cooldown_ms
    newest = max(f[0] for f in window) if window else 0
    keep = [f for f in window if f[0] > newest - window_ms]
    return keep, alerts, cooldown_until_ms


class FailedLogins(StatefulProcessor):
    """Brute-force detection per entity (grouping key ``entity``: ``user:…``/``src_ip:…``).

    Input rows: ``event_time``, ``failed`` and ``other`` (the other side, for evidence);
    successes pass through so the query's watermark follows every login.
    """

    def __init__(
        self, threshold: int, window_ms: int, cooldown_ms: int, close_at_end: bool = False
    ) -> None:
        """``close_at_end``: a batch job has no timers, so it keeps no state either."""
        self.threshold = threshold
        self.window_ms = window_ms
        self.cooldown_ms = cooldown_ms
        self.close_at_end = close_at_end

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.failures = handle.getListState("failures", FAILURE_STATE)
        self.cooldown = handle.getValueState("cooldown", COOLDOWN_STATE)

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        frame = pd.concat(list(rows), ignore_index=True)
        frame = frame[frame["failed"].astype(bool)]
        if frame.empty:  # successes only: nothing to count, no state to keep
            yield alert_frame([])
            return
        new = list(
            zip(millis(frame["event_time"]).tolist(), frame["other"].astype(str), strict=True)
        )
        recent = (
            [(int(a), str(o)) for a, o in self.failures.get()] if self.failures.exists() else []
        )
        stored = self.cooldown.get() if self.cooldown.exists() else None
        until = int(stored[0]) if stored is not None else 0
        keep, alerts, until = count_failures(
            recent, new, entity=str(key[0]), threshold=self.threshold, window_ms=self.window_ms,
            cooldown_until_ms=until, cooldown_ms=self.cooldown_ms,
        )  # fmt: skip
        if not self.close_at_end:
            self.failures.put(keep)
            self.cooldown.update((until,))
            newest = max(at for at, _ in keep)
            move_timer(self.handle, max(newest + self.window_ms, until))
        yield alert_frame(alerts)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        self.failures.clear()
        self.cooldown.clear()
        yield alert_frame([])

    def close(self) -> None:
        return


# ---------------------------------------------------------------------------------------
# Devices

DEVICE_STATE = StructType(
    [
        StructField("last_seen_ms", LongType()),
        StructField("quiet", BooleanType()),
        StructField("ip", StringType()),
        StructField("hostname", StringType()),
    ]
)

# last_seen_ms; quiet (released its lease, or its silence was reported); ip; hostname
Device = tuple[int, bool, str, str]


def watch_device(
    device: Device | None,
    events: list[tuple[int, str, str, str, bool]],
    *,
    mac: str,
    silence_ms: int,
) -> tuple[Device, list[Alert]]:
    """Apply DHCP events ``(at_ms, action, ip, hostname, known)`` in time order: the
    device afterwards, and its alerts (a new device; a silence inside the events)."""
    alerts: list[Alert] = []
    entity = f"mac:{mac}"
    for at_ms, action, ip, hostname, known in sorted(events):
        if device is None and not known:
            evidence = {"ip": ip, "hostname": hostname, "action": action}
            alerts.append(Alert("new_device", "medium", entity, at_ms, at_ms, evidence,
                                at_ms, at_ms))  # fmt: skip
        elif device is not None and not device[1] and at_ms - device[0] >= silence_ms:
            alerts.append(offline_alert(mac, device, silence_ms))
        last = max(at_ms, device[0]) if device is not None else at_ms
        device = (last, action == "release", ip, hostname) if last == at_ms else device
    assert device is not None
    return device, alerts


def offline_alert(mac: str, device: Device, silence_ms: int) -> Alert:
    last_seen, _, ip, hostname = device
    evidence = {"ip": ip, "hostname": hostname, "silent_minutes": silence_ms / 60_000}
    return Alert("device_offline", "medium", f"mac:{mac}", last_seen, last_seen + silence_ms,
                 evidence, last_seen, last_seen)  # fmt: skip


class DeviceWatch(StatefulProcessor):
    """New and silent devices, per MAC (grouping key ``mac``).

    Input rows: ``event_time``, ``action``, ``ip``, ``hostname`` and ``known`` (whether
    the inventory lists the MAC). A batch job (``close_at_end``) has no timers: it
    reports a silence at the end when ``horizon`` (a column: the time up to which the
    input is complete) is at least ``silence`` past the device's last event.
    """

    def __init__(self, silence_ms: int, close_at_end: bool = False) -> None:
        self.silence_ms = silence_ms
        self.close_at_end = close_at_end

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.device = handle.getValueState("device", DEVICE_STATE)

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        frame = pd.concat(list(rows), ignore_index=True)
        events = list(
            zip(
                millis(frame["event_time"]).tolist(),
                frame["action"].astype(str),
                frame["ip"].astype(str),
                frame["hostname"].astype(str),
                frame["known"].astype(bool),
                strict=True,
            )
        )
        stored = self.device.get() if self.device.exists() else None
        before: Device | None = tuple(stored) if stored is not None else None
        mac = str(key[0])
        device, alerts = watch_device(before, events, mac=mac, silence_ms=self.silence_ms)
        if self.close_at_end:
            horizon = int(millis(frame["horizon"]).max())
            if not device[1] and horizon - device[0] >= self.silence_ms:
                alerts.append(offline_alert(mac, device, self.silence_ms))
        else:
            self.device.update(device)
            move_timer(self.handle, None if device[1] else device[0] + self.silence_ms)
        yield alert_frame(alerts)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        stored = self.device.get() if self.device.exists() else None
        if stored is None or stored[1]:
            yield alert_frame([])
            return
        device: Device = (int(stored[0]), True, str(stored[2]), str(stored[3]))
        self.device.update(device)  # reported: a return must not report it again
        yield alert_frame([offline_alert(str(key[0]), device, self.silence_ms)])

    def close(self) -> None:
        return
