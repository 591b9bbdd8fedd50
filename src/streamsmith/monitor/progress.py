"""Progress events as event-log records: pure functions over Spark's progress JSON.

A record is flat where operators look first (rates, duration, watermark, state, lag,
quarantine and late counts) and keeps the full progress JSON for everything else
(per-operator state, source offsets, every duration).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from streamsmith.io.read_counts import FILES_READ, LINES_READ, READ_COUNT, REREAD
from streamsmith.transforms.expectations import EXPECTATIONS_METRIC, ROWS

# Spark reports this watermark before the first event time is seen.
_NO_WATERMARK = "1970-01-01T00:00:00.000Z"

# Names of the observed metrics streamsmith attaches to its queries.
QUARANTINE_METRIC = "quarantine"
LATE_METRIC = "late"
FLOW_METRIC = "streamsmith_flow"  # a flow's main query: its rejects and oldest event
RECORDS_READ = "read"  # FLOW_METRIC's field counting the records read, rejected ones too
WRITTEN_METRIC = "written"  # every query: the rows it wrote
CARRIED_REJECTS = "rejects"  # FLOW_METRIC's field carrying a batch's few rejected rows
# FLOW_METRIC's fields for a Kafka source: ms from a record's Kafka timestamp to its
# processing, over the batch's records (for a real-time query, over a checkpoint interval).
LATENCY_P50, LATENCY_P99, LATENCY_MAX = "latency_p50_ms", "latency_p99_ms", "latency_max_ms"
LATENCY_FIELDS = (LATENCY_P50, LATENCY_P99, LATENCY_MAX)
# FLOW_METRIC observes the median and the 99th percentile as one array.
LATENCY_QUANTILES_MS, LATENCY_QUANTILES = "latency_quantiles_ms", (0.5, 0.99)


def parse_time(text: str) -> datetime:
    """A Spark progress timestamp (``2026-11-23T10:00:00.123Z``) as an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def progress_record(progress: Mapping[str, Any]) -> dict[str, Any]:
    """The event-log record of one ``StreamingQueryProgress`` (given as its JSON)."""
    durations = progress.get("durationMs") or {}
    operators = progress.get("stateOperators") or []
    observed = progress.get("observedMetrics") or {}
    watermark = (progress.get("eventTime") or {}).get("watermark")
    if watermark == _NO_WATERMARK:
        watermark = None
    batch_time = progress.get("timestamp")
    read = records_read(progress)
    sources = [source_lag(source) for source in progress.get("sources") or []]
    lags = [source["lag"] for source in sources if source["lag"] is not None]
    return {
        "event": "progress",
        "query": progress.get("name"),
        "query_id": progress.get("id"),
        "run_id": progress.get("runId"),
        "batch_id": progress.get("batchId"),
        "batch_time": batch_time,
        "input_rows": read,
        "output_rows": output_rows(progress),
        "input_rate": _records_rate(progress, "inputRowsPerSecond", read),
        "process_rate": _records_rate(progress, "processedRowsPerSecond", read),
        "batch_ms": durations.get("triggerExecution"),
        "watermark": watermark,
        "watermark_delay_s": _delay(batch_time, watermark),
        "state_rows": sum(int(op.get("numRowsTotal") or 0) for op in operators),
        "state_memory_bytes": sum(int(op.get("memoryUsedBytes") or 0) for op in operators),
        "dropped_by_watermark": sum(
            int(op.get("numRowsDroppedByWatermark") or 0) for op in operators
        ),
        "quarantined": _observed(observed, QUARANTINE_METRIC),
        "late": _observed(observed, LATE_METRIC),
        "expectations": expectation_counts(observed),
        **latency(observed),
        "lag": sum(lags) if lags else None,
        "lag_bytes": _sum_known(source.get("lag_bytes") for source in sources),
        "sources": json.dumps(sources),
        "progress": json.dumps(_without_carried_rows(progress), default=str),
    }


def records_read(progress: Mapping[str, Any]) -> int:
    """The records a batch read: counted as its main query parsed them, rejected ones
    too, where it does so (a flow with a quarantine or late table); else Spark's input
    rows, with the records of files of lines in place of the rows the reader counted
    (``io.files``: Spark counts a file decoded whole as one row)
    and without the rows a second scan of one input read again (``REREAD``). Spark's
    input rows are fewer where it pushes a filter into a JSON or CSV reader (flows that
    parse no more than their filter lets through: see ``runtime.frames``)."""
    observed = progress.get("observedMetrics") or {}
    flow = observed.get(FLOW_METRIC)
    if isinstance(flow, Mapping) and flow.get(RECORDS_READ) is not None:
        return int(flow[RECORDS_READ])
    files, lines = _counted(observed, FILES_READ), _counted(observed, LINES_READ)
    twice = _counted(observed, REREAD)
    return max(0, int(progress.get("numInputRows") or 0) - files - twice) + lines


def _counted(observed: Mapping[str, Any], prefix: str) -> int:
    """The sum of the counts of the observed metrics named ``prefix`` and a number."""
    return sum(
        int(metric.get(READ_COUNT) or 0)
        for name, metric in observed.items()
        if name.startswith(prefix) and isinstance(metric, Mapping)
    )


def _records_rate(progress: Mapping[str, Any], name: str, read: int) -> float | None:
    """Spark's rate ``name`` (rows per second) in records: its rows are files where a
    query reads files of lines (see :func:`records_read`)."""
    rate = _number(progress.get(name))
    rows = int(progress.get("numInputRows") or 0)
    if rate is None or rows in (0, read):
        return rate
    return rate * read / rows


def latency(observed: Mapping[str, Any]) -> dict[str, int | None]:
    """The batch's read latency (``LATENCY_FIELDS``), None for a flow not on Kafka."""
    flow = observed.get(FLOW_METRIC)
    values: Mapping[str, Any] = flow if isinstance(flow, Mapping) else {}
    quantiles = values.get(LATENCY_QUANTILES_MS)
    if isinstance(quantiles, list | tuple):  # else a log of before 2026-12-07: one field each
        values = {**values, LATENCY_P50: quantiles[0], LATENCY_P99: quantiles[1]}
    return {name: _whole(values.get(name)) for name in LATENCY_FIELDS}


def _whole(value: Any) -> int | None:
    return None if value is None else int(value)


def output_rows(progress: Mapping[str, Any]) -> int | None:
    """The rows a batch wrote: its observed count, else the count Spark's sink reports
    (``Sink.counts_rows``), else None (unknown)."""
    observed = _observed(progress.get("observedMetrics") or {}, WRITTEN_METRIC)
    if observed is not None:
        return observed
    reported = _number((progress.get("sink") or {}).get("numOutputRows"))
    return int(reported) if reported is not None and reported >= 0 else None


def rows_written(progress: Mapping[str, Any]) -> int:
    """The rows a batch wrote (0 when unknown)."""
    return output_rows(progress) or 0


def _without_carried_rows(progress: Mapping[str, Any]) -> Mapping[str, Any]:
    """``progress`` without the rejected rows a main query carries to its quarantine
    (up to a few MB of raw payloads per batch): the log keeps their count."""
    observed = progress.get("observedMetrics") or {}
    flow = observed.get(FLOW_METRIC)
    if not isinstance(flow, Mapping) or CARRIED_REJECTS not in flow:
        return progress
    carried = flow[CARRIED_REJECTS]
    kept = {**flow, CARRIED_REJECTS: None if carried is None else len(carried)}
    return {**progress, "observedMetrics": {**observed, FLOW_METRIC: kept}}


def expectation_counts(observed: Mapping[str, Any]) -> dict[str, dict[str, int]] | None:
    """Per expectation, how many of the batch's judged records passed and failed."""
    metric = observed.get(EXPECTATIONS_METRIC)
    if not isinstance(metric, Mapping) or metric.get(ROWS) is None:
        return None
    judged = int(metric[ROWS])
    return {
        name: {"passed": judged - int(failed or 0), "failed": int(failed or 0)}
        for name, failed in metric.items()
        if name != ROWS
    }


def source_lag(source: Mapping[str, Any]) -> dict[str, Any]:
    """How far one source is behind after a batch.

    Kafka (Spark's or streamsmith's connector): the latest offset minus the processed
    end offset, per partition, in records. File sources: the files (and bytes) Spark
    has listed but not yet read, which it reports as ``numFilesOutstanding``.
    """
    description = str(source.get("description", ""))
    metrics = source.get("metrics") or {}
    end, latest = _offsets(source.get("endOffset")), _offsets(source.get("latestOffset"))
    lag: int | None = None
    lag_bytes: int | None = None
    per_partition: dict[str, int] = {}
    if end is not None and latest is not None and _is_topic_offsets(latest):
        for topic, partitions in latest.items():
            for partition, offset in partitions.items():
                done = int((end.get(topic) or {}).get(partition, 0))
                per_partition[f"{topic}-{partition}"] = max(0, int(offset) - done)
        lag = sum(per_partition.values())
    elif "numFilesOutstanding" in metrics:
        lag = int(metrics["numFilesOutstanding"])
        lag_bytes = int(metrics.get("numBytesOutstanding", 0))
    return {
        "description": description,
        "start": source.get("startOffset"),
        "end": source.get("endOffset"),
        "latest": source.get("latestOffset"),
        "lag": lag,
        "lag_bytes": lag_bytes,
        "lag_partitions": per_partition or None,
    }


def _offsets(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return None
    return value


def _is_topic_offsets(value: Any) -> bool:
    """Kafka offsets: ``{"topic": {"0": 12, "1": 40}}``."""
    return isinstance(value, dict) and all(
        isinstance(partitions, dict)
        and all(isinstance(offset, int) for offset in partitions.values())
        for partitions in value.values()
    )


def _observed(observed: Mapping[str, Any], name: str) -> int | None:
    metric = observed.get(name)
    if not isinstance(metric, Mapping) or metric.get("rows") is None:
        return None
    return int(metric["rows"])


def _delay(batch_time: str | None, watermark: str | None) -> float | None:
    if not batch_time or not watermark:
        return None
    return round((parse_time(batch_time) - parse_time(watermark)).total_seconds(), 3)


def _number(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return None if math.isnan(number) else round(number, 3)  # NaN: no rate for this batch


def _sum_known(values: Any) -> int | None:
    known = [int(value) for value in values if value is not None]
    return sum(known) if known else None
