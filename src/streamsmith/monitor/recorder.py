"""The monitor of one run: a StreamingQueryListener and the places its events go.

Every event (query started, progress, terminated; the supervisor's failures, restarts
and give-ups; service-level alerts) goes to the event log, and from there to the
Prometheus metrics, the Kafka topic and the notifiers that the spec configures.

Spark calls the listener on its listener-bus thread. A monitoring error must not take
the stream down, so it is logged with its traceback and recorded as a
``monitor_error`` event instead of being raised into Spark.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
    StreamingQueryListener,
)

from streamsmith.config import PipelineSpec, is_secret_key, parse_duration
from streamsmith.io.postgres.dsn import dsn_secrets
from streamsmith.monitor import observed
from streamsmith.monitor.alerts import SloWatch
from streamsmith.monitor.eventlog import EventLog, prune_event_logs
from streamsmith.monitor.lag import FileSourceProbe
from streamsmith.monitor.metrics import Health, MonitorServer, QueryMetrics
from streamsmith.monitor.notify import Notifier
from streamsmith.monitor.progress import LATE_METRIC, QUARANTINE_METRIC, progress_record
from streamsmith.monitor.status_cache import cached_statuses
from streamsmith.secrets import REGISTRY, install_log_redaction
from streamsmith.spark import jvm

log = logging.getLogger(__name__)
_SLOW_AFTER = "every slow batch is a slow_batch alert in the event log"
_STATUS_EVERY_S = 60.0  # how often a run carries status's fold on


class Monitor:
    """Records the events of the queries named in ``queries`` (others are ignored)."""

    def __init__(
        self,
        spec: PipelineSpec,
        root: Path,
        queries: Mapping[str, float],
        secrets: Iterable[str] = (),
        file_sources: Mapping[str, FileSourceProbe] | None = None,
    ) -> None:
        """``queries`` maps each query name to its trigger interval in seconds (0: none);
        ``file_sources`` the queries reading files to where they read (for their lag)."""
        self.spec = spec
        self.queries = dict(queries)
        self.file_sources = dict(file_sources or {})
        retention_s = parse_duration(spec.monitor.retention)
        prune_event_logs(root, spec.app, retention_s)
        all_secrets = [*secrets, *spec_secrets(spec)]
        self.log = EventLog(
            root,
            spec.app,
            all_secrets,
            max_bytes=int(spec.monitor.file_mb * 2**20),
            retention_s=retention_s,
        )
        REGISTRY.register(all_secrets)  # and out of log lines on stderr
        install_log_redaction()
        self.metrics = QueryMetrics(spec.app)
        self.slo = SloWatch(spec.monitor.alerts, self.queries)
        self.notifier = Notifier(spec.notify, self._notify_failed)
        self._forward = _kafka_forwarder(spec)
        self._names: dict[str, str] = {}  # query id -> name
        self._said_slow: set[str] = set()  # queries whose slow batch the run said on stderr
        self._lock = threading.RLock()  # an alert is recorded while its progress is
        self.server: MonitorServer | None = None
        self.listener = ProgressListener(self)
        self.root = root
        self._status_kept_at = time.monotonic()
        self._status_keeper: threading.Thread | None = None

    def attach(self, spark: SparkSession, health: Health) -> None:
        """Listen to ``spark``'s queries; serve metrics when the spec asks for a port."""
        spark.streams.addListener(self.listener)
        port = self.spec.monitor.metrics_port
        if port is not None:
            self.server = MonitorServer(self.metrics, health, port)
            log.info("metrics and health on http://127.0.0.1:%d", self.server.port)

    def detach(self, spark: SparkSession) -> None:
        """Stop listening, serving and notifying (call :func:`flush_listener_bus` first to
        record every pending event)."""
        spark.streams.removeListener(self.listener)
        if self.server is not None:
            self.server.stop()
        if self._forward is not None and self._forward.flush(10):
            self.log.write({"event": "monitor_error", "message": "events not forwarded in 10 s"})
        self.notifier.close()

    def record(self, record: dict[str, Any]) -> dict[str, Any]:
        """Write one event everywhere it goes; return it as written (redacted)."""
        with self._lock:
            written = self.log.write(record)
            self.metrics.update(written)
            if self._forward is not None and self.spec.monitor.kafka_topic:
                self._forward.produce(
                    self.spec.monitor.kafka_topic,
                    key=str(written.get("query") or "").encode(),
                    value=json.dumps(written).encode(),
                    on_delivery=self._forwarded,
                )
                self._forward.poll(0)
            self.notifier.send(written)
            self._keep_status()
            if written.get("event") == "progress":
                for alert in self.slo.observe(written):
                    if alert.rule == "slow_batch" and alert.query not in self._said_slow:
                        self._said_slow.add(alert.query)
                        said = (alert.query, alert.message, _SLOW_AFTER)
                        log.warning("%s: %s (said once; %s)", *said)
                    self.record(
                        {
                            "event": "alert",
                            "query": alert.query,
                            "rule": alert.rule,
                            "message": alert.message,
                        }
                    )
        return written

    def _keep_status(self) -> None:
        """Carry ``status``'s fold on every minute, on a thread of its own, so the first
        look after a long run reads a minute of log, not all of it (monitor.status_cache)."""
        now = time.monotonic()
        busy = self._status_keeper is not None and self._status_keeper.is_alive()
        if busy or now - self._status_kept_at < _STATUS_EVERY_S:
            return
        self._status_kept_at = now
        self._status_keeper = threading.Thread(
            target=self._fold_status, name="status-fold", daemon=True
        )
        self._status_keeper.start()

    def _fold_status(self) -> None:
        try:
            cached_statuses(self.root, self.spec.app)
        except (OSError, ValueError) as exc:  # status folds the log itself then
            log.warning("status fold not kept: %s", exc)

    def on_spark_event(self, event: Any) -> None:
        """Turn a listener event into a record, if it belongs to this run."""
        try:
            record = self._spark_record(event)
            if record is not None:
                self.record(record)
        except Exception as exc:
            log.exception("monitor failed on %s", type(event).__name__)
            self.log.write({"event": "monitor_error", "message": f"{type(exc).__name__}: {exc}"})

    def _spark_record(self, event: Any) -> dict[str, Any] | None:
        if isinstance(event, QueryStartedEvent):
            if event.name not in self.queries:
                return None
            self._names[str(event.id)] = str(event.name)
            return {
                "event": "started",
                "query": event.name,
                "query_id": str(event.id),
                "run_id": str(event.runId),
            }
        if isinstance(event, QueryProgressEvent):
            progress = json.loads(event.progress.json)
            if progress.get("name") not in self.queries:
                return None
            record = progress_record(progress)
            for column, metric in (("late", LATE_METRIC), ("quarantined", QUARANTINE_METRIC)):
                if record[column] is None:
                    record[column] = observed.take(record["query"], record["batch_id"], metric)
            probe = self.file_sources.get(record["query"])
            if record["lag"] is None and probe is not None:
                backlog = probe.backlog()
                record["lag"], record["lag_bytes"] = backlog.files, backlog.bytes
            return record
        if isinstance(event, QueryIdleEvent):
            name = self._names.get(str(event.id))
            if name is None:
                return None
            return {"event": "idle", "query": name, "query_id": str(event.id)}
        if isinstance(event, QueryTerminatedEvent):
            name = self._names.get(str(event.id))
            if name is None:
                return None
            return {
                "event": "terminated",
                "query": name,
                "query_id": str(event.id),
                "run_id": str(event.runId),
                "message": first_line(event.exception) if event.exception else None,
            }
        return None

    def _forwarded(self, error: Any, _message: Any) -> None:
        """Delivery report of an event sent to ``monitor.kafka_topic``."""
        if error is not None:
            log.warning("event not forwarded to Kafka: %s", error)
            self.log.write({"event": "monitor_error", "message": f"Kafka forward: {error}"})

    def _notify_failed(self, channel: str, error: str, event: Mapping[str, Any]) -> None:
        self.log.write(
            {
                "event": "notify_failed",
                "query": event.get("query"),
                "rule": channel,
                "message": f"{event.get('event')} notification not delivered: {error}",
            }
        )


class ProgressListener(StreamingQueryListener):
    """Hands every Spark streaming event to the :class:`Monitor`."""

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor

    def onQueryStarted(self, event: QueryStartedEvent) -> None:
        self.monitor.on_spark_event(event)

    def onQueryProgress(self, event: QueryProgressEvent) -> None:
        self.monitor.on_spark_event(event)

    def onQueryIdle(self, event: QueryIdleEvent) -> None:
        self.monitor.on_spark_event(event)

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:
        self.monitor.on_spark_event(event)


def flush_listener_bus(spark: SparkSession, timeout_ms: int = 30_000) -> None:
    """Wait until Spark has delivered every pending listener event (progress included)."""
    jvm.wait_for_listener_bus(spark, timeout_ms)


_TRACEBACK = "Traceback (most recent call last):"


def first_line(text: str) -> str:
    """The first non-blank line of an error message (Spark's carry a stack trace). When
    that line only opens a Python traceback (an error raised in a ``foreachBatch`` write
    reaches Spark as ``... Return Message: Traceback (most recent call last):``), the
    exception the traceback ends with takes its place: what failed, and why."""
    lines = str(text).splitlines()
    first = next((line.strip() for line in lines if line.strip()), "unknown error")
    if not first.endswith(_TRACEBACK):
        return first
    raised = _raised(lines)
    return first if raised is None else f"{first.removesuffix(_TRACEBACK)}{raised}"


def _raised(lines: list[str]) -> str | None:
    """The exception line of the last Python traceback in ``lines`` (of a chain, the one
    raised last), without the exception's module; the lines after it (a Java stack) are
    not part of it, unless it is py4j's ``Py4JJavaError`` (a Spark call the function
    made failed, a Delta write of the batch): then the Java error's root cause."""
    found, in_frames, java = None, False, None
    for at, line in enumerate(lines):
        if line.rstrip().endswith(_TRACEBACK):
            in_frames = True
        elif in_frames and line.strip() and not line[:1].isspace():
            name, colon, message = line.strip().partition(":")
            found, in_frames = f"{name.rsplit('.', 1)[-1]}{colon}{message}", False
            java = at + 1 if name.endswith("Py4JJavaError") else None
    causes = [] if java is None else [
        line.strip().removeprefix("Caused by:").removeprefix(":").strip()
        for line in lines[java:] if line.startswith((": ", "Caused by: "))
    ]  # fmt: skip
    if causes:
        name, colon, message = causes[-1].partition(": ")
        return f"{name.rsplit('.', 1)[-1]}{colon}{message}"
    return found


def spec_secrets(spec: PipelineSpec) -> list[str]:
    """The secrets a spec holds: PostgreSQL DSN, webhook URLs, Kafka passwords."""
    found: list[str] = []
    if spec.postgres.dsn is not None:
        found += dsn_secrets(spec.postgres.dsn.get_secret_value())
    if spec.notify.webhook is not None:
        found.append(spec.notify.webhook.get_secret_value())
    for flow in spec.flows.values():
        found += [secret for _, sink in flow.named_sinks for secret in sink.secrets()]
    option_sets = [spec.kafka.options, *(source.options for source in spec.sources.values())]
    for options in option_sets:
        found += [str(value) for key, value in options.items() if is_secret_key(key)]
    return found


def _kafka_forwarder(spec: PipelineSpec) -> Any:
    """A producer for ``monitor.kafka_topic``, or None."""
    if not spec.monitor.kafka_topic:
        return None
    from confluent_kafka import Producer

    from streamsmith.io.kafka.sink import producer_config

    conf = {
        key.removeprefix("kafka."): str(value)
        for key, value in spec.kafka_options({}).items()
        if key.startswith("kafka.")
    }
    return Producer(producer_config(conf))
