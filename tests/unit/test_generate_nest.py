"""The Nest generator: reproducible snapshots whose expected counts a reader can recompute.

The messages are parsed here independently of the generator, and camera records and
sightings are recounted from them and ``locations``, the way the pipeline counts them.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from itertools import pairwise
from typing import Any

import pytest

from streamsmith.generate.nest import NestData, nest_data

START = datetime(2026, 11, 20, tzinfo=UTC)
SPAN = timedelta(hours=6)
NEST_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
CAMERA_FIELDS = [
    "device_id",
    "software_version",
    "structure_id",
    "where_id",
    "where_name",
    "name",
    "name_long",
    "is_online",
    "is_streaming",
    "is_audio_input_enable",
    "last_is_online_change",
    "is_video_history_enabled",
    "web_url",
    "app_url",
    "is_public_share_enabled",
    "activity_zones",
    "public_share_url",
    "snapshot_url",
    "last_event",
]
LAST_EVENT_FIELDS = [
    "has_sound",
    "has_motion",
    "has_person",
    "start_time",
    "end_time",
    "urls_expire_time",
    "web_url",
    "app_url",
    "image_url",
    "animated_image_url",
    "activity_zone_ids",
]


def parse(value: str) -> datetime:
    assert NEST_TIME.fullmatch(value), value
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%f%z")


def documents(data: NestData) -> list[dict[str, Any] | None]:
    """Each message parsed, or None when it is not JSON."""
    parsed: list[dict[str, Any] | None] = []
    for message in data.messages:
        try:
            parsed.append(json.loads(message))
        except ValueError:
            parsed.append(None)
    return parsed


def recount(data: NestData) -> tuple[int, Counter[tuple[str, datetime]]]:
    """Camera records and sightings as explode + filter + inner join + hourly window count."""
    zip_of = dict(data.locations)
    records = 0
    sightings: Counter[tuple[str, datetime]] = Counter()
    for document in documents(data):
        if document is None:
            continue
        for camera in document["devices"]["cameras"].values():
            records += 1
            event = camera["last_event"]
            if event["has_person"] and camera["device_id"] in zip_of:
                hour = parse(event["start_time"]).replace(minute=0, second=0, microsecond=0)
                sightings[zip_of[camera["device_id"]], hour] += 1
    return records, sightings


@pytest.fixture(scope="module")
def clean() -> NestData:
    return nest_data(devices=40, events=500, seed=11)


@pytest.fixture(scope="module")
def dirty() -> NestData:
    return nest_data(devices=40, events=500, seed=11, corrupt_fraction=0.1)


def test_same_arguments_give_identical_data(clean: NestData) -> None:
    assert nest_data(devices=40, events=500, seed=11) == clean
    assert nest_data(devices=40, events=500, seed=12).messages != clean.messages


def test_clean_messages_are_all_nest_snapshots(clean: NestData) -> None:
    parsed = documents(clean)
    assert len(parsed) == len(clean.keys) == 500
    assert clean.corrupt_messages == 0
    for document, key in zip(parsed, clean.keys, strict=True):
        assert document is not None
        assert list(document) == ["metadata", "devices", "structures"]
        assert document["metadata"]["client_version"] == 1
        assert re.fullmatch(r"c\.[0-9a-f]+", document["metadata"]["access_token"])
        assert list(document["devices"]) == ["thermostats", "smoke_co_alarms", "cameras"]
        (structure_id,) = document["structures"]
        assert key == structure_id.encode()
        structure = document["structures"][structure_id]
        assert structure["cameras"] == list(document["devices"]["cameras"])
        assert structure["thermostats"] == list(document["devices"]["thermostats"])
        assert structure["smoke_co_alarms"] == list(document["devices"]["smoke_co_alarms"])
        assert document["devices"]["cameras"], "every home has a camera"


def test_cameras_carry_every_field_with_nest_timestamps(clean: NestData) -> None:
    for document in documents(clean):
        assert document is not None
        for device_id, camera in document["devices"]["cameras"].items():
            assert list(camera) == CAMERA_FIELDS
            assert camera["device_id"] == device_id
            assert re.fullmatch(r"cam-[0-9a-f]{12}", device_id)
            assert list(camera["last_event"]) == LAST_EVENT_FIELDS
            assert all(v is not None for v in camera.values())
            event = camera["last_event"]
            began, ended = parse(event["start_time"]), parse(event["end_time"])
            assert START <= began < START + SPAN
            assert timedelta(seconds=5) <= ended - began <= timedelta(seconds=300)
            parse(event["urls_expire_time"])
            parse(camera["last_is_online_change"])
        for thermostat in document["devices"]["thermostats"].values():
            parse(thermostat["last_connection"])
            assert isinstance(thermostat["humidity"], int)
            assert isinstance(thermostat["ambient_temperature_c"], float)


def test_messages_are_sent_in_roughly_time_order(clean: NestData) -> None:
    latest = [
        max(parse(c["last_event"]["start_time"]) for c in d["devices"]["cameras"].values())
        for d in documents(clean)
        if d is not None
    ]
    assert all(b - a > -timedelta(minutes=10) for a, b in pairwise(latest))


def test_counts_match_an_independent_recount(clean: NestData, dirty: NestData) -> None:
    for data in (clean, dirty):
        records, sightings = recount(data)
        assert data.camera_records == records
        assert data.sightings == dict(sightings)
        assert all(hour.tzinfo is not None and hour.minute == 0 for _, hour in data.sightings)
    people = sum(clean.sightings.values())
    assert 0.15 * clean.camera_records < people < 0.4 * clean.camera_records
    assert len({zip_code for zip_code, _ in clean.sightings}) > 1
    assert len({hour for _, hour in clean.sightings}) == 6


def test_unregistered_cameras_exist_and_are_not_sighted(clean: NestData) -> None:
    registered = {device_id for device_id, _ in clean.locations}
    assert len(registered) == len(clean.locations)
    seen: set[str] = set()
    structures: dict[str, str] = {}
    for document in documents(clean):
        assert document is not None
        for structure in document["structures"].values():
            structures.update(dict.fromkeys(structure["cameras"], structure["postal_code"]))
            structures.update(dict.fromkeys(structure["thermostats"], structure["postal_code"]))
            structures.update(dict.fromkeys(structure["smoke_co_alarms"], structure["postal_code"]))
        seen.update(document["devices"]["cameras"])
    unregistered = seen - registered
    assert unregistered == {c for c in structures if c.startswith("cam-")} - registered
    assert len(unregistered) == 4  # a tenth of the 40 cameras
    assert {d for d in structures if not d.startswith("cam-")} <= registered
    assert all(structures[device_id] == zip_code for device_id, zip_code in clean.locations)

    with_them = Counter[tuple[str, datetime]]()
    for document in documents(clean):
        assert document is not None
        for camera in document["devices"]["cameras"].values():
            if camera["last_event"]["has_person"]:
                hour = parse(camera["last_event"]["start_time"]).replace(
                    minute=0, second=0, microsecond=0
                )
                with_them[structures[camera["device_id"]], hour] += 1
    assert sum(with_them.values()) > sum(clean.sightings.values())


def test_corrupt_messages_are_not_json_and_leave_the_rest_unchanged(
    clean: NestData, dirty: NestData
) -> None:
    parsed = documents(dirty)
    corrupt = [i for i, d in enumerate(parsed) if d is None]
    assert len(corrupt) == dirty.corrupt_messages == 50
    assert dirty.keys == clean.keys
    assert dirty.locations == clean.locations
    for index, message in enumerate(dirty.messages):
        if index not in corrupt:
            assert message == clean.messages[index]
    assert dirty.camera_records < clean.camera_records


def test_a_small_corrupt_fraction_still_corrupts_something() -> None:
    data = nest_data(devices=3, events=20, seed=5, corrupt_fraction=0.01)
    assert data.corrupt_messages == 1
    assert sum(d is None for d in documents(data)) == 1


def test_window_and_timestamps_follow_start_in_another_zone() -> None:
    start = datetime(2026, 11, 20, 9, 30, tzinfo=timezone(timedelta(hours=2)))
    data = nest_data(devices=8, events=50, seed=3, start=start, span=timedelta(hours=2))
    hours = {hour for _, hour in data.sightings}
    assert hours <= {datetime(2026, 11, 20, h, tzinfo=UTC) for h in (7, 8, 9)}
    assert all(hour.utcoffset() == timedelta(0) for hour in hours)


def test_one_device_and_no_events() -> None:
    data = nest_data(devices=1, events=0, seed=1)
    assert data.messages == data.keys == ()
    assert data.camera_records == 0 and data.sightings == {}
    assert len(data.locations) == 1  # a single camera is always registered


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"devices": 0}, "devices must be an integer >= 1"),
        ({"devices": True}, "devices must be an integer >= 1"),
        ({"events": -1}, "events must be an integer >= 0"),
        ({"corrupt_fraction": 1.5}, "corrupt_fraction must be between 0 and 1"),
        ({"corrupt_fraction": -0.1}, "corrupt_fraction must be between 0 and 1"),
        ({"span": timedelta(0)}, "span must be positive"),
        (
            {"start": START + timedelta(microseconds=1), "span": timedelta(microseconds=1)},
            "span must contain a whole millisecond",
        ),
        ({"start": datetime(2026, 11, 20)}, "start must be timezone-aware"),
    ],
)
def test_invalid_arguments_are_named(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        nest_data(**{"devices": 4, "events": 10, "seed": 1, **arguments})
