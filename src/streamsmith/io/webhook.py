"""A webhook sink: each row POSTed as JSON, for low-volume outputs such as alerts.

Rows are collected to the driver (a webhook is for tens of rows per batch, not
millions) and posted one by one, each tried ``1 + retries`` times with a bounded
timeout, the whole batch within ``deadline``. A receiver that is down never fails or
stalls the stream beyond that deadline: rows not delivered are written to the lake
table of failed deliveries with the error and the number of attempts, under the batch's
id, so a replayed batch does not add a second record (a Delta table keeps the first; a
Parquet one, left by an earlier version, has it replaced).

Delivery is at least once: a batch replayed after a crash posts its rows again. Rows
carry their own ids (``alert_id``), and each POST sends the row's first column in the
``Idempotency-Key`` header, so receivers can drop repeats.
"""

from __future__ import annotations

import http.client
import json
import logging
import time
import urllib.error
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import IntegerType, StringType, StructField, StructType, TimestampType

from streamsmith.config import ConfValue, Trigger, parse_duration
from streamsmith.errors import UserError
from streamsmith.io.delta_marks import check_replay
from streamsmith.io.http_json import post_json
from streamsmith.io.lake import kept_format, prepare_table, start_foreach_batch, write_batch

log = logging.getLogger(__name__)

UNDELIVERED_SCHEMA = StructType(
    [
        StructField("row", StringType()),
        StructField("error", StringType()),
        StructField("attempts", IntegerType()),
        StructField("failed_at", TimestampType()),
        StructField("batch_id", IntegerType()),
    ]
)


@dataclass(frozen=True)
class WebhookTarget:
    """Where and how patiently to post."""

    url: str
    timeout_s: float = 5.0
    retries: int = 3
    deadline_s: float = 30.0

    @classmethod
    def from_options(cls, url: str, options: dict[str, ConfValue]) -> WebhookTarget:
        unknown = sorted(set(options) - {"timeout", "retries", "deadline"})
        if unknown:
            raise UserError(
                f"unknown webhook sink option(s) {', '.join(unknown)}: use timeout, retries, "
                "deadline"
            )
        try:
            return cls(
                url=url,
                timeout_s=parse_duration(str(options.get("timeout", "5s"))),
                retries=int(str(options.get("retries", 3))),
                deadline_s=parse_duration(str(options.get("deadline", "30s"))),
            )
        except ValueError as exc:
            raise UserError(f"webhook sink options: {exc}") from None


def deliver(
    rows: list[dict[str, Any]], target: WebhookTarget
) -> list[tuple[dict[str, Any], str, int]]:
    """POST each row; return the rows that failed with their error and attempts."""
    started = time.monotonic()
    failed: list[tuple[dict[str, Any], str, int]] = []
    for row in rows:
        error, attempts = "", 0
        for attempt in range(target.retries + 1):
            left = target.deadline_s - (time.monotonic() - started)
            if left <= 0:
                error = error or f"batch deadline of {target.deadline_s:g} s passed"
                break
            if attempt:
                time.sleep(min(0.2 * 2 ** (attempt - 1), 2.0, left))
            attempts += 1
            try:
                post_json(target.url, row, timeout=min(target.timeout_s, max(left, 0.1)),
                          idempotency_key=str(next(iter(row.values()), "")))  # fmt: skip
                error = ""
                break
            except (OSError, urllib.error.URLError, http.client.HTTPException) as exc:
                error = f"{type(exc).__name__}: {exc}"
        if error:
            log.warning("webhook delivery failed after %d attempt(s): %s", attempts, error)
            failed.append((row, error, attempts))
    return failed


def start_webhook_stream(
    frame: DataFrame,
    *,
    name: str,
    checkpoint: Path,
    trigger: Trigger,
    target: WebhookTarget,
    undelivered: Path,
) -> StreamingQuery:
    """Start a query posting every new row to the webhook; failures land in
    ``undelivered`` (a lake table partitioned by ``batch_id``)."""
    table_format = kept_format(undelivered, "delta")
    prepare_table(frame.sparkSession, undelivered, UNDELIVERED_SCHEMA, ("batch_id",), table_format)

    def post_batch(batch: DataFrame, batch_id: int) -> None:
        rows = [row.asDict(recursive=True) for row in batch.collect()]
        failed = deliver(rows, target)
        if not failed:
            return
        now = datetime.now(UTC)
        records = [
            (json.dumps(row, default=str, sort_keys=True), error, attempts, now)
            for row, error, attempts in failed
        ]
        spark: SparkSession = batch.sparkSession
        failures = spark.createDataFrame(
            [(*record, batch_id) for record in records], UNDELIVERED_SCHEMA
        ).coalesce(1)
        write_batch(failures, undelivered, batch_id, ("batch_id",), app_id=app_id)

    app_id = f"streamsmith:{name}"
    check_replay(undelivered, app_id, checkpoint)
    return start_foreach_batch(frame, post_batch, name=name, checkpoint=checkpoint, trigger=trigger)
