"""Prometheus metrics and a health check, served on loopback while an app runs.

``GET /metrics`` is the Prometheus text format; ``GET /health`` answers 200 with a JSON
body when every flow's queries are up (or finished their catch-up run, or wait for the
flows they read from) and 503 with the same body when one is down, restarting or given up.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

Health = Callable[[], Mapping[str, str]]  # query name -> state
_UP_STATES = frozenset({"active", "finished", "waiting"})


class QueryMetrics:
    """The gauges and counters of every query of one app, updated from event records."""

    def __init__(self, app: str) -> None:
        self.app = app
        self.registry = CollectorRegistry()
        labels = ["app", "query"]

        def gauge(name: str, text: str) -> Gauge:
            return Gauge(f"streamsmith_{name}", text, labels, registry=self.registry)

        def counter(name: str, text: str) -> Counter:
            return Counter(f"streamsmith_{name}", text, labels, registry=self.registry)

        self.gauges = {
            "input_rate": gauge("input_rows_per_second", "Input rate of the last batch"),
            "process_rate": gauge("processed_rows_per_second", "Processing rate, last batch"),
            "batch_ms": gauge("batch_duration_ms", "Duration of the last batch"),
            "watermark_delay_s": gauge("watermark_delay_seconds", "Batch time minus watermark"),
            "state_rows": gauge("state_rows", "Rows in the query's state stores"),
            "state_memory_bytes": gauge("state_memory_bytes", "Memory of its state stores"),
            "lag": gauge("source_lag", "Records (Kafka) or files behind the source's latest"),
            "latency_p50_ms": gauge("read_latency_p50_ms", "Kafka timestamp to processing, p50"),
            "latency_p99_ms": gauge("read_latency_p99_ms", "Kafka timestamp to processing, p99"),
            "batch_id": gauge("batch_id", "Last completed batch id"),
        }
        self.counters = {
            "input_rows": counter("input_rows", "Rows read"),
            "quarantined": counter("quarantined_rows", "Rows sent to quarantine"),
            "late": counter("late_rows", "Rows dropped as later than the watermark"),
            "dropped_by_watermark": counter(
                "dropped_by_watermark_rows", "Rows Spark's stateful operators dropped"
            ),
        }
        self.up = gauge("query_up", "1 while the query runs, 0 otherwise")
        self.expectations = {
            outcome: Counter(
                f"streamsmith_expectation_{outcome}_rows",
                f"Records that {outcome} an expectation",
                [*labels, "expectation"],
                registry=self.registry,
            )
            for outcome in ("passed", "failed")
        }
        self.events = Counter(
            "streamsmith_events", "Lifecycle events", [*labels, "event"], registry=self.registry
        )

    def update(self, record: Mapping[str, Any]) -> None:
        """Fold one event-log record into the metrics."""
        query, event = str(record.get("query")), str(record.get("event"))
        if event != "progress":
            self.events.labels(self.app, query, event).inc()
            if event in ("started", "terminated", "failure"):
                self.up.labels(self.app, query).set(1 if event == "started" else 0)
            return
        for key, gauge in self.gauges.items():
            if record.get(key) is not None:
                gauge.labels(self.app, query).set(float(record[key]))
        for key, counter in self.counters.items():
            if record.get(key):
                counter.labels(self.app, query).inc(float(record[key]))
        for name, counts in (record.get("expectations") or {}).items():
            for outcome, counter in self.expectations.items():
                counter.labels(self.app, query, name).inc(float(counts.get(outcome) or 0))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class MonitorServer:
    """The ``/metrics`` and ``/health`` HTTP server, on 127.0.0.1 only."""

    def __init__(self, metrics: QueryMetrics, health: Health, port: int = 0) -> None:
        handler = _handler(metrics, health)
        self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="monitor-http", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def health_body(states: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
    """HTTP status and body of ``/health`` for the queries' states."""
    healthy = all(state in _UP_STATES for state in states.values())
    return (200 if healthy else 503), {"healthy": healthy, "queries": dict(states)}


def answer(
    handler: BaseHTTPRequestHandler,
    status: int,
    body: bytes,
    content_type: str,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Send a complete, uncached HTTP answer from a request handler, its type as given
    (``nosniff``: a browser never reads JSON or text as a page or script)."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.send_header("Cache-Control", "no-store")
    handler.send_header("X-Content-Type-Options", "nosniff")
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


def _handler(metrics: QueryMetrics, health: Health) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._answer(200, metrics.exposition(), CONTENT_TYPE_LATEST)
            elif self.path == "/health":
                status, body = health_body(health())
                self._answer(status, json.dumps(body).encode(), "application/json")
            else:
                self._answer(404, b"try /metrics or /health\n", "text/plain")

        def _answer(self, status: int, body: bytes, content_type: str) -> None:
            answer(self, status, body, content_type)

        def log_message(self, format: str, *args: Any) -> None:
            return  # scrapes every few seconds would flood the run's output

    return Handler
