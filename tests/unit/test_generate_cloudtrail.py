"""The CloudTrail generator: reproducible, AWS-shaped, and honest about what it corrupts.

Every file is read back independently of the generator, so the report's counts are
checked against what a reader actually finds.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from streamsmith.generate.cloudtrail import (
    FILE_LEVEL_KINDS,
    RECORD_LEVEL_KINDS,
    CloudTrailGenerationReport,
    CorruptKind,
    generate_cloudtrail,
)

START = datetime(2026, 11, 20, tzinfo=UTC)
SPAN = timedelta(days=3)
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
PATH_PATTERN = re.compile(
    r"AWSLogs/(?P<account>\d{12})/CloudTrail/(?P<region>[a-z]{2}-[a-z]+-\d)/"
    r"(?P<y>\d{4})/(?P<m>\d{2})/(?P<d>\d{2})/"
    r"(?P=account)_CloudTrail_(?P=region)_(?P<stamp>\d{8}T\d{4}Z)_[A-Z0-9]{16}\.json\.gz"
)
UUID_PATTERN = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
REQUIRED_KEYS = {
    "eventVersion",
    "userIdentity",
    "eventTime",
    "eventSource",
    "eventName",
    "awsRegion",
    "sourceIPAddress",
    "userAgent",
    "requestParameters",
    "responseElements",
    "requestID",
    "eventID",
    "readOnly",
    "eventType",
    "managementEvent",
    "recipientAccountId",
    "eventCategory",
}
DATA_EVENTS = {"GetObject", "PutObject", "DeleteObject", "Invoke", "GetItem", "PutItem"}


# ------------------------------------------------------------------ an independent reader


def read_file(path: Path) -> tuple[str | None, list[Any]]:
    """(file-level problem or None, records), as a careful reader would see the file."""
    try:
        text = gzip.decompress(path.read_bytes())
    except (EOFError, gzip.BadGzipFile, zlib.error):
        return CorruptKind.TRUNCATED_GZIP.value, []
    try:
        document = json.loads(text)
    except ValueError:
        return CorruptKind.NOT_JSON.value, []
    if not isinstance(document, dict) or not isinstance(document.get("Records"), list):
        return CorruptKind.NO_RECORDS.value, []
    return None, document["Records"]


def is_event_time(value: Any) -> bool:
    try:
        datetime.strptime(value, TIME_FORMAT)
    except (TypeError, ValueError):
        return False
    return True


def record_problems(record: Any) -> list[str]:
    """Every way in which ``record`` is broken (empty for a valid record)."""
    if not isinstance(record, dict):
        return [CorruptKind.NOT_AN_OBJECT.value]
    problems = []
    if "eventID" not in record:
        problems.append(CorruptKind.MISSING_EVENT_ID.value)
    if "eventTime" not in record:
        problems.append(CorruptKind.MISSING_EVENT_TIME.value)
    elif not is_event_time(record["eventTime"]):
        problems.append(CorruptKind.BAD_EVENT_TIME.value)
    wrong = [
        key
        for key, kind in (("readOnly", bool), ("managementEvent", bool), ("userIdentity", dict))
        if not isinstance(record.get(key), kind)
    ]
    problems += [CorruptKind.WRONG_TYPE.value] * len(wrong)
    return problems


def census(report: CloudTrailGenerationReport) -> tuple[Counter[str], list[dict[str, Any]]]:
    """Quarantine rows per kind and the valid records, found by reading every file."""
    kinds: Counter[str] = Counter()
    valid: list[dict[str, Any]] = []
    for path in report.paths:
        file_problem, records = read_file(Path(path))
        if file_problem:
            kinds[file_problem] += 1
            continue
        for record in records:
            problems = record_problems(record)
            assert len(problems) <= 1, f"corrupt in more than one way: {record!r}"
            if problems:
                kinds[problems[0]] += 1
            else:
                valid.append(record)
    return kinds, valid


def generate(out_dir: Path, **overrides: Any) -> CloudTrailGenerationReport:
    arguments: dict[str, Any] = {"files": 12, "records_per_file": 25, "seed": 7}
    arguments.update(overrides)
    return generate_cloudtrail(out_dir, **arguments)


def relative_files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


# ------------------------------------------------------------------------ reproducibility


def test_same_arguments_give_byte_identical_files(tmp_path: Path) -> None:
    first = generate(tmp_path / "a", corrupt_fraction=0.4)
    second = generate(tmp_path / "b", corrupt_fraction=0.4)

    files_a, files_b = relative_files(tmp_path / "a"), relative_files(tmp_path / "b")
    assert len(files_a) == 12
    assert files_a == files_b
    assert first.by_kind == second.by_kind
    assert first.valid_event_ids == second.valid_event_ids
    assert [Path(p).name for p in first.paths] == [Path(p).name for p in second.paths]


def test_different_seeds_give_different_files_and_event_ids(tmp_path: Path) -> None:
    one = generate(tmp_path / "a", seed=1)
    two = generate(tmp_path / "b", seed=2)

    assert not {Path(p).name for p in one.paths} & {Path(p).name for p in two.paths}
    assert len(one.valid_event_ids) == len(two.valid_event_ids) == 12 * 25
    assert not one.valid_event_ids & two.valid_event_ids


def test_collect_ids_only_changes_the_report(tmp_path: Path) -> None:
    with_ids = generate(tmp_path / "a", corrupt_fraction=0.3)
    without = generate(tmp_path / "b", corrupt_fraction=0.3, collect_ids=False)

    assert without.valid_event_ids == frozenset()
    assert len(with_ids.valid_event_ids) == with_ids.valid_records
    assert relative_files(tmp_path / "a") == relative_files(tmp_path / "b")


# ------------------------------------------------------------------------------ counting


@pytest.mark.parametrize(
    ("corrupt_fraction", "seed"), [(0.0, 3), (0.1, 4), (0.5, 5), (1.0, 6), (1.0, 7)]
)
def test_report_reconciles_with_what_the_files_hold(
    tmp_path: Path, corrupt_fraction: float, seed: int
) -> None:
    report = generate(
        tmp_path, files=25, records_per_file=30, seed=seed, corrupt_fraction=corrupt_fraction
    )
    kinds, valid = census(report)

    assert report.files_written == len(report.paths) == 25
    assert report.by_kind == dict(kinds)
    assert report.quarantine_rows == sum(kinds.values())
    assert report.valid_records == len(valid)
    assert report.valid_event_ids == {r["eventID"] for r in valid}
    assert len(report.valid_event_ids) == len(valid)
    healthy_files = 25 - sum(report.by_kind.get(k.value, 0) for k in FILE_LEVEL_KINDS)
    record_rows = sum(report.by_kind.get(k.value, 0) for k in RECORD_LEVEL_KINDS)
    assert report.valid_records + record_rows == healthy_files * 30


def test_clean_run_has_only_valid_records(tmp_path: Path) -> None:
    report = generate(tmp_path, corrupt_fraction=0.0)

    assert report.by_kind == {}
    assert report.quarantine_rows == 0
    assert report.valid_records == 12 * 25
    assert census(report)[0] == Counter()


@pytest.mark.parametrize("seed", range(25))
def test_small_run_contains_every_kind(tmp_path: Path, seed: int) -> None:
    report = generate(tmp_path, files=20, records_per_file=20, seed=seed, corrupt_fraction=0.5)

    assert set(report.by_kind) == {kind.value for kind in CorruptKind}
    assert all(n >= 1 for n in report.by_kind.values())
    assert census(report)[0] == Counter(report.by_kind)


def test_corruption_rates_follow_corrupt_fraction(tmp_path: Path) -> None:
    report = generate(tmp_path, files=200, records_per_file=50, seed=11, corrupt_fraction=0.4)

    corrupt_files = sum(report.by_kind.get(k.value, 0) for k in FILE_LEVEL_KINDS)
    corrupt_records = sum(report.by_kind.get(k.value, 0) for k in RECORD_LEVEL_KINDS)
    healthy_records = (200 - corrupt_files) * 50
    assert 0.12 <= corrupt_files / 200 <= 0.28  # expected 0.2
    assert 0.17 <= corrupt_records / healthy_records <= 0.23  # expected 0.2


def test_valid_event_ids_never_appear_in_corrupt_data(tmp_path: Path) -> None:
    report = generate(tmp_path, files=30, records_per_file=20, seed=9, corrupt_fraction=0.8)
    corrupt_text = []
    for path in report.paths:
        raw = Path(path).read_bytes()
        # Decompress as much as is there: a truncated file still holds a prefix.
        text = zlib.decompressobj(wbits=31).decompress(raw).decode("utf-8", "replace")
        file_problem, records = read_file(Path(path))
        if file_problem:
            corrupt_text.append(text)
        else:
            corrupt_text += [json.dumps(r) for r in records if record_problems(r)]

    assert corrupt_text
    blob = "\n".join(corrupt_text)
    assert not [event_id for event_id in report.valid_event_ids if event_id in blob]


# ------------------------------------------------------------------------- corrupt shapes


def test_corrupt_files_have_the_promised_shape(tmp_path: Path) -> None:
    report = generate(tmp_path, files=40, records_per_file=10, seed=5, corrupt_fraction=1.0)
    seen = set()
    for path in map(Path, report.paths):
        raw = path.read_bytes()
        file_problem, _ = read_file(path)
        if file_problem == CorruptKind.TRUNCATED_GZIP.value:
            partial = zlib.decompressobj(wbits=31).decompress(raw)
            assert raw[:2] == b"\x1f\x8b"
            assert partial.startswith(b'{"Records":[{"eventVersion":"1.08"')
        elif file_problem == CorruptKind.NOT_JSON.value:
            assert gzip.decompress(raw)  # a valid gzip stream ...
        elif file_problem == CorruptKind.NO_RECORDS.value:
            digest = json.loads(gzip.decompress(raw))
            assert "Records" not in digest
            assert digest["logFiles"]
            assert "digestPublicKeyFingerprint" in digest
        seen.add(file_problem)
    assert seen >= {kind.value for kind in FILE_LEVEL_KINDS}


def test_corrupt_records_keep_everything_else_valid(tmp_path: Path) -> None:
    report = generate(tmp_path, files=10, records_per_file=100, seed=8, corrupt_fraction=1.0)
    by_problem: dict[str, list[Any]] = {}
    for path in report.paths:
        file_problem, records = read_file(Path(path))
        for record in [] if file_problem else records:
            for problem in record_problems(record):
                by_problem.setdefault(problem, []).append(record)

    assert set(by_problem) == {kind.value for kind in RECORD_LEVEL_KINDS}
    for record in by_problem[CorruptKind.NOT_AN_OBJECT.value]:
        assert isinstance(record, str | int | float)
        # Spark unquotes string elements: they must not then look like an object.
        assert not str(record).lstrip().startswith("{")
    for record in by_problem[CorruptKind.BAD_EVENT_TIME.value]:
        assert isinstance(record["eventTime"], str)
        assert UUID_PATTERN.fullmatch(record["eventID"])
    for record in by_problem[CorruptKind.MISSING_EVENT_ID.value]:
        assert is_event_time(record["eventTime"])
    for record in by_problem[CorruptKind.MISSING_EVENT_TIME.value]:
        assert UUID_PATTERN.fullmatch(record["eventID"])
    wrong_fields: Counter[str] = Counter()
    for record in by_problem[CorruptKind.WRONG_TYPE.value]:
        assert UUID_PATTERN.fullmatch(record["eventID"])
        assert is_event_time(record["eventTime"])
        if record["readOnly"] == "maybe":
            wrong_fields["readOnly"] += 1
        if record["userIdentity"] == "root":
            wrong_fields["userIdentity"] += 1
    assert set(wrong_fields) == {"readOnly", "userIdentity"}
    assert wrong_fields.total() == len(by_problem[CorruptKind.WRONG_TYPE.value])


# --------------------------------------------------------------------------- layout, time


def test_paths_follow_the_aws_layout(tmp_path: Path) -> None:
    report = generate(tmp_path, files=30)
    accounts, regions = set(), set()
    for path in map(Path, report.paths):
        match = PATH_PATTERN.fullmatch(path.relative_to(tmp_path).as_posix())
        assert match, path
        _, records = read_file(path)
        first = datetime.strptime(records[0]["eventTime"], TIME_FORMAT)
        assert (match["y"], match["m"], match["d"]) == (
            f"{first:%Y}",
            f"{first:%m}",
            f"{first:%d}",
        )
        assert match["stamp"] == f"{first:%Y%m%dT%H%MZ}"
        assert {r["recipientAccountId"] for r in records} == {match["account"]}
        assert {r["awsRegion"] for r in records} == {match["region"]}
        accounts.add(match["account"])
        regions.add(match["region"])
    assert 2 <= len(accounts) <= 3
    assert len(regions) >= 4
    assert sorted(report.paths) == sorted(str(p) for p in tmp_path.rglob("*.json.gz"))


def test_event_times_are_formatted_in_range_and_sorted(tmp_path: Path) -> None:
    report = generate(tmp_path, files=20, records_per_file=40)
    dates = set()
    for path in report.paths:
        _, records = read_file(Path(path))
        times = [r["eventTime"] for r in records]
        assert times == sorted(times)
        for text in times:
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", text)
            moment = datetime.strptime(text, TIME_FORMAT).replace(tzinfo=UTC)
            assert START <= moment < START + SPAN
            dates.add(moment.date())
    assert len(dates) == 3  # the span starts at midnight and covers exactly three days


def test_non_utc_and_fractional_start_is_respected(tmp_path: Path) -> None:
    start = datetime(2026, 11, 20, 23, 30, 0, 500_000, tzinfo=timezone(timedelta(hours=2)))
    span = timedelta(minutes=5)
    report = generate(tmp_path, files=5, records_per_file=50, start=start, span=span)
    for path in report.paths:
        _, records = read_file(Path(path))
        for record in records:
            moment = datetime.strptime(record["eventTime"], TIME_FORMAT).replace(tzinfo=UTC)
            assert start <= moment < start + span
    assert all("/2026/11/20/" in p for p in report.paths)  # 21:30 UTC, not 23:30


# ------------------------------------------------------------------------------- content


def test_valid_records_look_like_cloudtrail(tmp_path: Path) -> None:
    report = generate(tmp_path, files=40, records_per_file=100, seed=21)
    _, valid = census(report)
    sources: Counter[str] = Counter()
    types: Counter[str] = Counter()
    errors = 0
    for record in valid:
        assert record.keys() >= REQUIRED_KEYS
        assert record["eventVersion"] == "1.08"
        assert UUID_PATTERN.fullmatch(record["eventID"])
        identity = record["userIdentity"]
        types[identity["type"]] += 1
        sources[record["eventSource"]] += 1
        name = record["eventName"]
        if name.startswith(("Get", "Describe", "List", "Lookup")):
            assert record["readOnly"] is True
        assert record["eventCategory"] == ("Data" if name in DATA_EVENTS else "Management")
        assert record["managementEvent"] is (name not in DATA_EVENTS)
        assert record["eventType"] == (
            "AwsConsoleSignIn" if name == "ConsoleLogin" else "AwsApiCall"
        )
        assert isinstance(record["requestParameters"], dict | None)
        assert isinstance(record["responseElements"], dict | None)
        if "errorCode" in record:
            errors += 1
            assert record["errorMessage"]
            assert record["responseElements"] is None
        if identity["type"] == "AWSService":
            assert "accessKeyId" not in identity
            assert record["sourceIPAddress"] == identity["invokedBy"]
        else:
            assert re.fullmatch(r"\d{1,3}(\.\d{1,3}){3}", record["sourceIPAddress"])
            assert identity["accountId"] == record["recipientAccountId"]
            assert identity["arn"].startswith("arn:aws:")
        if identity["type"] == "AssumedRole":
            attributes = identity["sessionContext"]["attributes"]
            assert attributes["mfaAuthenticated"] in {"true", "false"}
            assert identity["sessionContext"]["sessionIssuer"]["userName"]
        if identity["type"] in {"IAMUser", "Root"}:
            assert identity["userName"]
        if record["eventSource"] == "iam.amazonaws.com":
            assert record["awsRegion"] == "us-east-1"  # IAM is global
        for resource in record.get("resources", []):
            assert {"ARN", "accountId", "type"} <= resource.keys()

    assert set(types) == {"IAMUser", "AssumedRole", "Root", "AWSService"}
    assert len(sources) >= 10
    assert 0.03 <= errors / len(valid) <= 0.07  # about 5 %
    assert any("resources" in r for r in valid)
    assert any("additionalEventData" in r for r in valid)


# ------------------------------------------------------------------------ writing, hooks


def test_writes_leave_no_temporary_files(tmp_path: Path) -> None:
    generate(tmp_path, files=15, corrupt_fraction=0.5)

    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".")]


def test_failed_write_removes_its_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
        assert Path(source).name.startswith(".")
        assert Path(source).parent == Path(target).parent
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        generate(tmp_path, files=1)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_on_file_is_called_after_each_file_in_order(tmp_path: Path) -> None:
    calls: list[tuple[Path, bool]] = []
    report = generate(tmp_path, files=6, on_file=lambda p: calls.append((p, p.is_file())))

    assert [str(p) for p, _ in calls] == list(report.paths)
    assert all(existed for _, existed in calls)
    assert all(isinstance(p, Path) for p, _ in calls)


def test_zero_files_writes_nothing(tmp_path: Path) -> None:
    report = generate(tmp_path / "out", files=0, corrupt_fraction=0.5)

    assert report == CloudTrailGenerationReport(0, 0, 0, {}, (), frozenset())
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"files": -1}, r"files must be an integer >= 0, got -1"),
        ({"files": 2.5}, r"files must be an integer"),
        ({"records_per_file": 0}, r"records_per_file must be >= 1, got 0"),
        ({"corrupt_fraction": 1.5}, r"corrupt_fraction must be between 0 and 1, got 1\.5"),
        ({"corrupt_fraction": -0.1}, r"corrupt_fraction must be between 0 and 1"),
        ({"corrupt_fraction": float("nan")}, r"corrupt_fraction must be between 0 and 1"),
        ({"span": timedelta(0)}, r"span must be positive.*timedelta\(hours=6\)"),
        ({"span": -timedelta(days=1)}, r"span must be positive"),
        (
            {"start": datetime(2026, 11, 20, 0, 0, 0, 1, tzinfo=UTC), "span": timedelta(0, 0, 5)},
            r"span must contain at least one whole second",
        ),
        ({"start": datetime(2026, 11, 20)}, r"start must be timezone-aware.*tzinfo="),
    ],
)
def test_invalid_arguments_are_rejected_with_a_fix(
    tmp_path: Path, overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        generate(tmp_path, **overrides)
    assert not any(tmp_path.iterdir())
