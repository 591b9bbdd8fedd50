"""Log curation transforms on known entries: JSON and log4j alike, and what is neither."""

from __future__ import annotations

import json
from datetime import datetime

from pyspark.sql import SparkSession

from streamsmith.schemas.logs import ENVELOPE_SCHEMA
from streamsmith.transforms.logs import curated_logs, log_entries
from streamsmith.transforms.quarantine import accepted, quarantined


def envelope(seq: int, message: str, service: str | None = "billing") -> dict[str, object]:
    return {
        "source": "collector-1", "host": "h1", "service": service,
        "collected_at": "2026-11-20T10:02:14Z",
        "collector": {"id": "c1", "seq": seq, "region": "eu-1"}, "message": message,
    }  # fmt: skip


def test_json_and_log4j_entries_share_one_schema_and_bad_ones_are_quarantined(
    spark: SparkSession,
) -> None:
    lines = [
        envelope(1, "2026-11-20 10:02:13,481 ERROR [pool-3-thread-2] org.acme.Billing - "
                    "charge failed - card declined"),
        envelope(2, json.dumps({"ts": "2026-11-20T10:02:13.500Z", "level": "warn",
                                "thread": "main", "logger": "org.acme.Auth",
                                "message": "slow"})),
        envelope(3, "\tat org.acme.Billing.charge(Billing.java:42)"),
        envelope(4, '{"ts": "2026-11-20T10:00:00Z", "level": "LOUD", "message": "?"}'),
        envelope(5, "2026-11-20 10:02:13,481 INFO [main] x - ok", service=None),
        envelope(1, "2026-11-20 10:02:13,481 ERROR [pool-3-thread-2] org.acme.Billing - "
                    "charge failed - card declined"),  # a collector retry
    ]  # fmt: skip
    source = spark.createDataFrame(
        [(json.dumps(line), "in.json", json.dumps(line), None) for line in lines],
        "value string, _source_file string, _raw string, _read_error string",
    )
    tagged = log_entries(source)
    reasons = sorted(r.reason for r in quarantined(tagged).collect())
    assert reasons == [
        "missing or invalid field service",
        "unparseable message: neither a JSON entry with ts and a known level nor a log4j line",
        "unparseable message: neither a JSON entry with ts and a known level nor a log4j line",
    ]
    rows = curated_logs(accepted(tagged)).orderBy("collector_seq").collect()
    assert [(r.collector_seq, r.format, r.level, r.thread, r.logger, r.text) for r in rows] == [
        (1, "log4j", "ERROR", "pool-3-thread-2", "org.acme.Billing",
         "charge failed - card declined"),
        (2, "json", "WARN", "main", "org.acme.Auth", "slow"),
    ]  # fmt: skip
    assert rows[0].log_time == datetime(2026, 11, 20, 10, 2, 13, 481000)
    assert str(rows[1].date) == "2026-11-20"
    assert set(ENVELOPE_SCHEMA.fieldNames()) - set(rows[0].asDict()) == {"collector", "message"}


def test_a_frame_that_tags_no_rejects_quarantines_nothing_without_reading(
    spark: SparkSession,
) -> None:
    """A flow's code may reject nothing (no ``_reject_reason``): its quarantine query
    then has the quarantine's columns and no rows, and Spark's plan reads no input."""
    frame = quarantined(spark.range(5).selectExpr("CAST(id AS STRING) AS value"))
    assert frame.columns == ["reason", "source_file", "position", "raw", "ingested_at",
                             "ingest_date"]  # fmt: skip
    assert frame.collect() == []
    assert "Range" not in frame._jdf.queryExecution().optimizedPlan().toString()
