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
    assert shot.stat().st_size > 10_000


def test_dashboard_needs_a_token_beyond_loopback(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="pass --token"):
        Dashboard(tmp_path, host="0.0.0.0")
    guarded = Dashboard(tmp_path, token="t0ken").start()
    try:
        base = f"http://127.0.0.1:{guarded.port}"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{base}/api/dashboard")
        assert refused.value.code == 401
        allowed = urllib.request.urlopen(f"{base}/api/dashboard?token=t0ken").read()
        assert b'"queries": []' in allowed
    finally:
        guarded.stop()
