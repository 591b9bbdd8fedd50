"""CloudTrail transforms on static DataFrames: parsing, flattening and every reject reason."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual

from streamsmith.io.decoding import decode_document
from streamsmith.schemas.cloudtrail import CLOUDTRAIL_EVENTS_SCHEMA
from streamsmith.transforms.cloudtrail import cloudtrail_events
from streamsmith.transforms.quarantine import accepted, quarantined

DOCS_SCHEMA = "_source_file string, _raw string, _read_error string"


def record(**overrides: object) -> dict[str, object]:
    base: dict[str, object] = {
        "eventVersion": "1.08",
        "userIdentity": {
            "type": "AssumedRole",
            "principalId": "AROAEXAMPLE:alice",
            "arn": "arn:aws:sts::111122223333:assumed-role/Admin/alice",
            "accountId": "111122223333",
            "accessKeyId": "ASIAEXAMPLE",
            "sessionContext": {
                "sessionIssuer": {"type": "Role", "userName": "Admin"},
                "attributes": {"mfaAuthenticated": "true", "creationDate": "2026-11-20T09:00:00Z"},
            },
        },
        "eventTime": "2026-11-20T10:02:13Z",
        "eventSource": "ec2.amazonaws.com",
        "eventName": "RunInstances",
        "awsRegion": "eu-west-1",
        "sourceIPAddress": "203.0.113.7",
        "userAgent": "aws-cli/2.15.0",
        "requestParameters": {"instanceType": "t3.micro", "minCount": 1},
        "responseElements": None,
        "requestID": "req-1",
        "eventID": "evt-1",
        "readOnly": False,
        "eventType": "AwsApiCall",
        "managementEvent": True,
        "recipientAccountId": "111122223333",
        "eventCategory": "Management",
    }
    base.update(overrides)
    return base


def documents(spark: SparkSession, *docs: tuple[str, str | None, str | None]) -> DataFrame:
    return spark.createDataFrame(list(docs), DOCS_SCHEMA)


def file_of(*records: object) -> str:
    return json.dumps({"Records": list(records)})


def test_valid_records_are_flattened_and_typed(spark: SparkSession) -> None:
    second = record(eventID="evt-2", eventTime="2026-11-21T23:59:59Z", errorCode="AccessDenied")
    tagged = cloudtrail_events(
        documents(spark, ("s3://b/f1.json.gz", file_of(record(), second), None))
    )

    rows = {row.eventID: row for row in accepted(tagged).collect()}

    assert accepted(tagged).schema == CLOUDTRAIL_EVENTS_SCHEMA
    assert quarantined(tagged).count() == 0
    first = rows["evt-1"]
    assert first.eventTime == dt.datetime(2026, 11, 20, 10, 2, 13)
    assert first.date == dt.date(2026, 11, 20)
    assert first.userIdentity_arn == "arn:aws:sts::111122223333:assumed-role/Admin/alice"
    assert first.userIdentity_sessionIssuer == "Admin"
    assert first.userIdentity_mfaAuthenticated is True
    assert first.readOnly is False
    assert json.loads(first.requestParameters) == {"instanceType": "t3.micro", "minCount": 1}
    assert first.responseElements is None
    assert first.source_file == "s3://b/f1.json.gz"
    assert rows["evt-2"].date == dt.date(2026, 11, 21)
    assert rows["evt-2"].errorCode == "AccessDenied"


@pytest.mark.parametrize(
    ("raw_record", "reason"),
    [
        ('"just a string"', "record is not a JSON object"),
        ("42", "record is not a JSON object"),
        (json.dumps(record(readOnly="maybe")), "record has fields of the wrong type: readOnly"),
        (
            json.dumps(record(userIdentity="root")),
            "record has fields of the wrong type: userIdentity",
        ),
        (
            json.dumps({k: v for k, v in record().items() if k != "eventID"}),
            "missing required field eventID",
        ),
        (
            json.dumps({k: v for k, v in record().items() if k != "eventTime"}),
            "missing required field eventTime",
        ),
        (json.dumps(record(eventTime="yesterday")), "unparseable eventTime 'yesterday'"),
        (
            json.dumps(record(eventTime="2026-13-45T99:00:00Z")),
            "unparseable eventTime '2026-13-45T99:00:00Z'",
        ),
    ],
)
def test_bad_records_are_quarantined_with_reason(
    spark: SparkSession, raw_record: str, reason: str
) -> None:
    text = '{"Records": [' + json.dumps(record(eventID="good")) + ", " + raw_record + "]}"
    tagged = cloudtrail_events(documents(spark, ("f.json", text, None)))

    bad = quarantined(tagged).collect()

    assert [row.eventID for row in accepted(tagged).collect()] == ["good"]
    assert len(bad) == 1
    assert bad[0].reason == reason
    assert bad[0].source_file == "f.json"
    assert bad[0].position == "Records[1]"
    if raw_record.startswith("{"):
        assert json.loads(bad[0].raw) == json.loads(raw_record)
    else:  # Spark keeps a scalar element's text, without JSON quotes
        assert bad[0].raw == str(json.loads(raw_record))
    assert bad[0].ingested_at is not None


@pytest.mark.parametrize(
    ("raw", "read_error", "reason"),
    [
        ("<html>Service Unavailable</html>", None, "file is not a JSON document"),
        ('{"logFiles": []}', None, "file has no Records array"),
        (
            '{"Records": [',
            "truncated gzip file: stream ends after 80 bytes",
            "unreadable file: truncated gzip file: stream ends after 80 bytes",
        ),
    ],
)
def test_bad_files_become_one_quarantine_row(
    spark: SparkSession, raw: str, read_error: str | None, reason: str
) -> None:
    tagged = cloudtrail_events(documents(spark, ("bad.json.gz", raw, read_error)))

    bad = quarantined(tagged).collect()

    assert accepted(tagged).count() == 0
    assert [(row.reason, row.source_file, row.position, row.raw) for row in bad] == [
        (reason, "bad.json.gz", None, raw)
    ]


def test_empty_records_array_yields_nothing(spark: SparkSession) -> None:
    tagged = cloudtrail_events(documents(spark, ("empty.json", '{"Records": []}', None)))
    assert tagged.count() == 0


def test_input_reconciles_with_table_plus_quarantine(spark: SparkSession) -> None:
    docs = documents(
        spark,
        ("a.json", file_of(record(eventID="a1"), "x", record(eventID="a3", eventTime="?")), None),
        ("b.json", "not json", None),
        ("c.json", file_of(record(eventID="c1")), None),
    )
    tagged = cloudtrail_events(docs)
    assert (accepted(tagged).count(), quarantined(tagged).count()) == (2, 3)


def test_decode_document_handles_gzip_truncation_and_encoding() -> None:
    import gzip

    payload = file_of(record()).encode()
    packed = gzip.compress(payload, mtime=0)

    assert decode_document(packed) == (payload.decode(), None)
    assert decode_document(payload) == (payload.decode(), None)
    partial, error = decode_document(packed[: len(packed) // 2])
    assert error == f"truncated gzip file: stream ends after {len(packed) // 2} bytes"
    assert partial is not None and payload.decode().startswith(partial)
    text, error = decode_document(b'{"Records": ["\xff"]}')
    assert error == "not UTF-8 text at byte 14"
    assert text == '{"Records": ["\ufffd"]}'
    _, error = decode_document(b"\x1f\x8b" + b"garbage" * 5)
    assert error is not None and error.startswith("corrupt gzip data")


def test_same_transform_serves_batch_and_stream(spark: SparkSession, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The stream's output equals the batch output of the very same function."""
    from streamsmith.config import SourceSpec
    from streamsmith.io.files import read_files

    (tmp_path / "f1.json").write_text(file_of(record(eventID="s1"), record(eventID="s2")))
    (tmp_path / "f2.json").write_text(file_of(record(eventID="s3"), "oops"))
    source = SourceSpec(format="json", path=str(tmp_path))
    batch = accepted(
        cloudtrail_events(read_files(spark, source, str(tmp_path), None, streaming=False))
    )
    stream = accepted(
        cloudtrail_events(read_files(spark, source, str(tmp_path), None, streaming=True))
    )
    query = (
        stream.writeStream.format("memory")
        .queryName("same_transform")
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
        assertDataFrameEqual(spark.table("same_transform"), batch)
        assert sorted(r.eventID for r in batch.collect()) == ["s1", "s2", "s3"]
    finally:
        query.stop()
