"""Synthetic Nest API snapshots for the ``nest-logs`` topic, with exactly known answers.

Each message is one snapshot of one home (structure) with all its devices, keyed by the
structure id. :class:`NestData` also carries the static ``device_locations`` rows and what
a correct pipeline must produce: the number of exploded camera records and the person
sightings per zip code and hour.

About a tenth of the cameras (at least one when there are two or more) are deliberately
left out of ``locations``: devices their owners never registered. The pipeline's inner
join with ``device_locations`` drops them, so ``sightings`` does not count them, while
``camera_records`` (the archive, before the join) does.

Snapshots are sent in time order; a camera's ``last_event`` starts up to ten minutes before
its snapshot, so event times are slightly out of order, as on a real feed. Corrupt
messages are chosen by a separate generator: the valid messages do not depend on
``corrupt_fraction``.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from streamsmith.generate import check_corruption_and_time, produce_all

__all__ = ["NestData", "nest_data", "publish"]


@dataclass(frozen=True)
class NestData:
    """The messages to publish, the static table to join with, and the expected results."""

    messages: tuple[bytes, ...]
    keys: tuple[bytes, ...]
    locations: tuple[tuple[str, str], ...]
    camera_records: int
    sightings: dict[tuple[str, datetime], int]
    corrupt_messages: int


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_HEX = "0123456789abcdef"
_ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
_EVENT_LAG_MS = 10 * 60 * 1000  # last_event starts at most this long before its snapshot
_PERSON_RATE = 0.3
_UNREGISTERED_RATE = 0.1

# (postal code, time zone) of the homes.
_ZIP_CODES = (
    ("94110", "America/Los_Angeles"),
    ("98103", "America/Los_Angeles"),
    ("80205", "America/Denver"),
    ("60614", "America/Chicago"),
    ("78704", "America/Chicago"),
    ("10013", "America/New_York"),
    ("02139", "America/New_York"),
    ("30307", "America/New_York"),
)
_HOME_NAMES = ("Home", "Lake House", "Apartment", "Cabin", "Beach House", "Mom's")
_WHERE = ("Front Door", "Backyard", "Driveway", "Garage", "Living Room", "Kitchen", "Nursery")
_ROOMS = ("Hallway", "Bedroom", "Upstairs", "Downstairs", "Basement", "Office")
_ZONES = ("Porch", "Sidewalk", "Gate", "Pool", "Window")
_HVAC_MODES = ("heat", "cool", "heat-cool", "eco", "off")
_CORRUPT_PAYLOADS = (
    b"<html><head><title>502 Bad Gateway</title></head><body>"
    b"<center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>",
    b"upstream request timeout",
)


def _hex(rng: random.Random, length: int) -> str:
    return "".join(rng.choices(_HEX, k=length))


def _nest_time(epoch_ms: int) -> str:
    """``2026-11-20T10:02:13.481Z``: what the Nest API sends and NEST_TIMESTAMP_FORMAT reads."""
    when = _EPOCH + epoch_ms * _MS
    return f"{when:%Y-%m-%dT%H:%M:%S}.{epoch_ms % 1000:03d}Z"


def _unique(rng: random.Random, prefix: str, taken: set[str]) -> str:
    while (device_id := f"{prefix}-{_hex(rng, 12)}") in taken:
        pass
    taken.add(device_id)
    return device_id


@dataclass(frozen=True)
class _Home:
    structure_id: str
    name: str
    postal_code: str
    time_zone: str
    access_token: str
    cameras: list[str]
    thermostats: list[str]
    smoke_co_alarms: list[str]


def _homes(rng: random.Random, devices: int) -> tuple[list[_Home], dict[str, _Home]]:
    """The structures and, for every device, the home it is installed in."""
    homes = []
    for _ in range(max(1, devices // 4)):
        postal_code, time_zone = rng.choice(_ZIP_CODES)
        homes.append(
            _Home(
                structure_id="".join(rng.choices(_ID_CHARS, k=54)),
                name=rng.choice(_HOME_NAMES),
                postal_code=postal_code,
                time_zone=time_zone,
                access_token=f"c.{_hex(rng, 48)}",
                cameras=[],
                thermostats=[],
                smoke_co_alarms=[],
            )
        )
    home_of: dict[str, _Home] = {}
    taken: set[str] = set()
    for index in range(devices):  # every home gets a camera before any gets a second one
        home = homes[index] if index < len(homes) else rng.choice(homes)
        home.cameras.append(camera := _unique(rng, "cam", taken))
        home_of[camera] = home
    for count, prefix in ((devices // 2, "thermo"), (devices // 3, "smoke")):
        for _ in range(count):
            home = rng.choice(homes)
            device_id = _unique(rng, prefix, taken)
            (home.thermostats if prefix == "thermo" else home.smoke_co_alarms).append(device_id)
            home_of[device_id] = home
    return homes, home_of


def _camera(
    rng: random.Random, device_id: str, home: _Home, now: int, first: int
) -> dict[str, Any]:
    """A camera's state at ``now`` (epoch ms); its last event starts no earlier than ``first``."""
    profile = random.Random(device_id)  # what does not change between snapshots
    where = profile.choice(_WHERE)
    zones = [{"name": z, "id": str(profile.randint(1, 999))} for z in profile.sample(_ZONES, 2)]
    web, app, auth = "https://home.nest.com/cameras/", "nestmobile://cameras/", home.access_token
    online = rng.random() < 0.95
    started = max(now - rng.randrange(_EVENT_LAG_MS), first)
    cuepoint = f"{device_id}/cuepoint/{started}?auth={auth}"
    return {
        "device_id": device_id,
        "software_version": profile.choice(("205-600052", "205-600055", "4.0")),
        "structure_id": home.structure_id,
        "where_id": "".join(profile.choices(_ID_CHARS, k=54)),
        "where_name": where,
        "name": where,
        "name_long": f"{where} camera",
        "is_online": online,
        "is_streaming": online and rng.random() < 0.9,
        "is_audio_input_enable": profile.random() < 0.8,
        "last_is_online_change": _nest_time(now - rng.randrange(1, 86_400_000)),
        "is_video_history_enabled": profile.random() < 0.6,
        "web_url": f"{web}{device_id}?auth={auth}",
        "app_url": f"{app}{device_id}?auth={auth}",
        "is_public_share_enabled": (shared := profile.random() < 0.1),
        "activity_zones": zones,
        "public_share_url": f"https://video.nest.com/live/{_hex(profile, 10)}" if shared else "",
        "snapshot_url": f"https://developer.nest.com/snapshot/{device_id}/{now}",
        "last_event": {
            "has_sound": rng.random() < 0.4,
            "has_motion": rng.random() < 0.7,
            "has_person": rng.random() < _PERSON_RATE,
            "start_time": _nest_time(started),
            "end_time": _nest_time(started + rng.randint(5_000, 300_000)),
            "urls_expire_time": _nest_time(started + 10 * 86_400_000),
            "web_url": web + cuepoint,
            "app_url": app + cuepoint,
            "image_url": f"https://nexusapi.dropcam.com/get_event_image?uuid={device_id}"
            f"&event={started}",
            "animated_image_url": f"https://nexusapi.dropcam.com/get_event_clip?uuid={device_id}"
            f"&event={started}",
            "activity_zone_ids": [z["id"] for z in zones if rng.random() < 0.5],
        },
    }


def _common(rng: random.Random, device_id: str, home: _Home, kind: str, now: int) -> dict[str, Any]:
    room = random.Random(device_id).choice(_ROOMS)
    return {
        "device_id": device_id,
        "locale": "en-US",
        "software_version": "5.9.3-5" if kind == "Thermostat" else "3.1rc9",
        "structure_id": home.structure_id,
        "name": f"{room} ({kind})",
        "name_long": f"{room} {kind}",
        "last_connection": _nest_time(now - rng.randrange(0, 900_000)),
        "is_online": rng.random() < 0.97,
    }


def _snapshot(rng: random.Random, home: _Home, now: int, first: int) -> dict[str, Any]:
    """The Nest API document for ``home`` at ``now``: devices keyed by id, as the API does."""
    thermostats = {}
    for device_id in home.thermostats:
        target = rng.choice((19.0, 20.0, 20.5, 21.0, 22.0))
        thermostats[device_id] = _common(rng, device_id, home, "Thermostat", now) | {
            "hvac_mode": rng.choice(_HVAC_MODES),
            "ambient_temperature_c": round(target + rng.uniform(-2.5, 2.5), 1),
            "target_temperature_c": target,
            "humidity": rng.randint(25, 65),
        }
    alarms = {}
    for device_id in home.smoke_co_alarms:
        alarm = "ok" if rng.random() < 0.98 else "warning"
        alarms[device_id] = _common(rng, device_id, home, "Protect", now) | {
            "battery_health": "ok" if rng.random() < 0.95 else "replace",
            "co_alarm_state": "ok",
            "smoke_alarm_state": alarm,
            "ui_color_state": "green" if alarm == "ok" else "yellow",
        }
    return {
        "metadata": {"access_token": home.access_token, "client_version": 1},
        "devices": {
            "thermostats": thermostats,
            "smoke_co_alarms": alarms,
            "cameras": {c: _camera(rng, c, home, now, first) for c in home.cameras},
        },
        "structures": {
            home.structure_id: {
                "structure_id": home.structure_id,
                "name": home.name,
                "country_code": "US",
                "postal_code": home.postal_code,
                "time_zone": home.time_zone,
                "away": "away" if rng.random() < 0.3 else "home",
                "thermostats": home.thermostats,
                "smoke_co_alarms": home.smoke_co_alarms,
                "cameras": home.cameras,
            }
        },
    }


def _validate(
    devices: int, events: int, corrupt_fraction: float, start: datetime, span: timedelta
) -> tuple[int, int]:
    """Check the arguments; return the first epoch ms >= start and how many ms the span holds."""
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise ValueError(f"devices must be an integer >= 1, got {devices!r}")
    if isinstance(events, bool) or not isinstance(events, int) or events < 0:
        raise ValueError(f"events must be an integer >= 0, got {events!r}")
    check_corruption_and_time(corrupt_fraction, start, span)
    microsecond = timedelta(microseconds=1)
    start_us = (start - _EPOCH) // microsecond
    first = -(-start_us // 1000)
    count = -(-(start_us + span // microsecond) // 1000) - first
    if count < 1:
        raise ValueError(f"span must contain a whole millisecond after start, got {span!r}")
    return first, count


def nest_data(
    *,
    devices: int,
    events: int,
    seed: int,
    corrupt_fraction: float = 0.0,
    start: datetime = datetime(2026, 11, 20, tzinfo=UTC),
    span: timedelta = timedelta(hours=6),
) -> NestData:
    """``events`` snapshots of homes with ``devices`` cameras, and the counts they must yield.

    Same arguments give identical bytes. Every ``last_event.start_time`` lies in
    ``[start, start + span)``. A ``corrupt_fraction`` share of the messages (at least one
    when positive) is replaced by non-JSON payloads, counted only in ``corrupt_messages``.
    """
    first, count = _validate(devices, events, corrupt_fraction, start, span)
    rng = random.Random(seed)
    corrupt_rng = random.Random(f"{seed}/corrupt")
    homes, home_of = _homes(rng, devices)
    cameras = [d for d in home_of if d.startswith("cam-")]
    unregistered_count = max(1, round(devices * _UNREGISTERED_RATE)) if devices > 1 else 0
    unregistered = set(rng.sample(cameras, unregistered_count))
    locations = tuple((d, home.postal_code) for d, home in home_of.items() if d not in unregistered)
    zip_of = dict(locations)

    corrupt_count = max(1, round(events * corrupt_fraction)) if corrupt_fraction and events else 0
    corrupt = set(corrupt_rng.sample(range(events), corrupt_count))
    messages: list[bytes] = []
    keys: list[bytes] = []
    camera_records = 0
    sightings: dict[tuple[str, datetime], int] = {}
    for index, now in enumerate(sorted(first + rng.randrange(count) for _ in range(events))):
        home = rng.choice(homes)
        snapshot = _snapshot(rng, home, now, first)
        document = json.dumps(snapshot, separators=(",", ":")).encode()
        keys.append(home.structure_id.encode())
        if index in corrupt:
            payloads = (*_CORRUPT_PAYLOADS, document[: corrupt_rng.randrange(1, len(document))])
            messages.append(corrupt_rng.choice(payloads))
            continue
        messages.append(document)
        for camera in snapshot["devices"]["cameras"].values():
            camera_records += 1
            event = camera["last_event"]
            if event["has_person"] and camera["device_id"] in zip_of:
                started = datetime.strptime(event["start_time"], "%Y-%m-%dT%H:%M:%S.%f%z")
                window = (
                    zip_of[camera["device_id"]],
                    started.replace(minute=0, second=0, microsecond=0),
                )
                sightings[window] = sightings.get(window, 0) + 1
    return NestData(
        messages=tuple(messages),
        keys=tuple(keys),
        locations=locations,
        camera_records=camera_records,
        sightings=sightings,
        corrupt_messages=len(corrupt),
    )


def publish(data: NestData, bootstrap: str, topic: str) -> int:
    """Produce every message with its key and wait for all acks; raise if any is missing."""
    return produce_all(bootstrap, topic, data.messages, data.keys)
