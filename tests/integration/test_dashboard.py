"""The dashboard in headless Chromium, against the event log of a real run.

The page is loaded the way a user loads it (its JavaScript fetches the data and draws
the charts); the rendered DOM must hold the run's numbers. A screenshot is kept in
``.artifacts/dashboard.png``.
"""

from __future__ import annotations

import shutil
import subprocess
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from streamsmith.apps import get_app
from streamsmith.config import Trigger, load_spec
from streamsmith.errors import UserError
from streamsmith.generate.cloudtrail import generate_cloudtrail
from streamsmith.monitor.eventlog import read_events
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import run_pipeline
from streamsmith.web.server import Dashboard

ARTIFACTS = Path(__file__).resolve().parents[2] / ".artifacts"
QUERY = "cloudtrail.cloudtrail_events"


class Rendered(HTMLParser):
    """The parts of the rendered page the test reads: table cells and chart series."""

    def __init__(self) -> None:
        super().__init__()
        self.loaded = False
        self.cells: dict[tuple[str, str], str] = {}
        self.series: dict[tuple[str, str], list[float | None]] = {}
        self.nodes: dict[str, str] = {}  # the dependency graph's nodes, by kind
        self.edges: set[str] = set()
        self._row: str | None = None
        self._cell: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "body" and found.get("data-loaded") == "true":
            self.loaded = True
        if tag == "tr" and found.get("data-query"):
            self._row = found["data-query"]
        if tag == "td" and self._row:
            self._cell = (found.get("class") or "").split(" ")[0]
        if tag == "g" and found.get("data-node"):
            self.nodes[str(found["data-node"])] = str(found.get("data-kind"))
        if tag == "line" and found.get("data-edge"):
            self.edges.add(str(found["data-edge"]))
        if tag == "polyline" and found.get("data-query"):
            values = (found.get("data-values") or "").split(",")
            key = (str(found["data-query"]), str(found["data-metric"]))
            self.series[key] = [float(v) if v else None for v in values]

    def handle_data(self, data: str) -> None:
        if self._row and self._cell:
            self.cells[(self._row, self._cell)] = data

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._cell = None
        if tag == "tr":
            self._row = None


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Chromium is missing: `make test` installs Debian's chromium"
    return found


def browse(url: str, *extra: str) -> str:
    command = [
        chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
        "--virtual-time-budget=8000", "--window-size=1400,2000", *extra, url,
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    return result.stdout


def test_dashboard_charts_hold_the_runs_numbers(spark: SparkSession, tmp_path: Path) -> None:
    generated = generate_cloudtrail(
        tmp_path / "input/cloudtrail", files=6, records_per_file=20, seed=5, corrupt_fraction=0.3
    )
    app = get_app("cloudtrail")
    spec = load_spec(
        app.default_spec,
        sets=["sources.cloudtrail_logs.max_files_per_trigger=2"],
        storage_root=str(tmp_path),
    )
    run_pipeline(spark, build_plan(app, spec, Trigger("available-now")))
    progress = [e for e in read_events(tmp_path, "cloudtrail") if e["event"] == "progress"]
    own = [e for e in progress if e["query"] == QUERY]
    quarantine = [e for e in progress if e["query"] == f"{QUERY}.quarantine"]
    assert len(own) == 3 and generated.quarantine_rows > 0

    dashboard = Dashboard(tmp_path).start()
    try:
        page = Rendered()
        page.feed(browse(dashboard.url, "--dump-dom"))
        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "dashboard.png"
        browse(dashboard.url, f"--screenshot={shot}")
    finally:
        dashboard.stop()

    assert page.loaded, "the page never rendered its data"
    assert page.cells[(QUERY, "batches")] == "3"
    assert page.cells[(QUERY, "state")] == "stopped"
    quarantined = page.cells[(f"{QUERY}.quarantine", "quarantined")]
    assert int(quarantined) == generated.quarantine_rows
    assert page.series[(QUERY, "input_rate")] == [e["input_rate"] for e in own]
    assert page.series[(QUERY, "batch_ms")] == [float(e["batch_ms"]) for e in own]
    drawn = page.series[(f"{QUERY}.quarantine", "quarantined")]
    assert sum(v or 0 for v in drawn) == generated.quarantine_rows
    assert len(drawn) == len(quarantine)
    charted = list(dict.fromkeys(query for query, _ in page.series))
    assert charted == [QUERY, f"{QUERY}.quarantine"]  # the flow's own charts first
    assert shot.stat().st_size > 10_000
    # The app's dependency graph, as its run recorded it: its source, flow and view.
    assert page.nodes == {"cloudtrail_logs": "source", "cloudtrail_events": "flow",
                          "cloudtrail_daily_activity": "view"}  # fmt: skip
    assert page.edges == {"cloudtrail_logs->cloudtrail_events",
                          "cloudtrail_events->cloudtrail_daily_activity"}  # fmt: skip


def request(url: str, host: str | None = None) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of a GET, with ``Host`` set as a browser would."""
    ask = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(ask) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, dict(refused.headers), refused.read()


def test_the_dashboard_needs_a_strong_token_and_a_loopback_host(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="at least 16"):
        Dashboard(tmp_path, token="t0ken")
    generated = Dashboard(tmp_path)
    assert len(generated.token) >= 32 and generated.token not in generated.address
    generated.server.server_close()

    token = "a-token-of-24-characters"
    guarded = Dashboard(tmp_path, token=token, allowed_hosts=["dash.internal"]).start()
    try:
        base = f"http://127.0.0.1:{guarded.port}"
        assert request(f"{base}/api/dashboard")[0] == 401  # on loopback too
        status, headers, body = request(f"{base}/api/dashboard?token={token}")
        assert status == 200 and b'"queries": []' in body
        assert headers["X-Content-Type-Options"] == "nosniff"
        status, headers, _ = request(guarded.url)
        assert status == 200 and "default-src 'none'" in headers["Content-Security-Policy"]
        assert "script-src 'sha256-" in headers["Content-Security-Policy"]
        # DNS rebinding: a page of evil.example resolved to 127.0.0.1 sends its own Host.
        assert request(guarded.url, host=f"evil.example:{guarded.port}")[0] == 421
        assert request(guarded.url, host=f"localhost:{guarded.port}")[0] == 200
        assert request(guarded.url, host="dash.internal")[0] == 200  # configured
    finally:
        guarded.stop()
