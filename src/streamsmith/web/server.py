"""``streamsmith dashboard``: the page and its JSON, served from the event log.

It reads what the log gained at every request, so it shows a run live and keeps showing
it after the run ended. On 127.0.0.1 it needs no credentials; bound to any other address it
requires a token (``?token=…`` or ``Authorization: Bearer …``), compared in constant
time, since the page shows error messages and table names.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from streamsmith.errors import UserError
from streamsmith.monitor.eventlog import LogFollower
from streamsmith.monitor.metrics import answer
from streamsmith.web.data import DashboardFold


def needs_token(host: str) -> bool:
    """Whether binding ``host`` exposes the page beyond this machine."""
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host != "localhost"


class Dashboard:
    """The dashboard's HTTP server, running on a background thread."""

    def __init__(
        self, root: Path, host: str = "127.0.0.1", port: int = 0, token: str | None = None
    ) -> None:
        if needs_token(host) and not token:
            raise UserError(
                f"the dashboard on {host} would be reachable from other machines: "
                "pass --token (or bind 127.0.0.1)"
            )
        self.root = root
        self.token = token
        self._follower = LogFollower(root, None)
        self._fold = DashboardFold()
        self._lock = threading.Lock()  # requests are served on threads of their own
        page = resources.files("streamsmith.web").joinpath("dashboard.html").read_bytes()
        self.server = ThreadingHTTPServer((host, port), _handler(self, page))
        self.host = host
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="dashboard", daemon=True
        )

    @property
    def url(self) -> str:
        suffix = f"/?token={self.token}" if self.token else "/"
        return f"http://{self.host}:{self.port}{suffix}"

    def start(self) -> Dashboard:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def data(self) -> dict[str, Any]:
        """The page's JSON, folded on from the events written since the last request."""
        with self._lock:
            if self._follower.rewritten():
                self._fold, self._follower.offsets = DashboardFold(), {}
            for event in self._follower.events():
                self._fold.add(event)
            skipped = self._follower.malformed  # event-log lines that are no JSON object
            return {"root": str(self.root), "malformed_event_lines": skipped, **self._fold.data()}

    def allowed(self, path: str, authorization: str | None) -> bool:
        if not self.token:
            return True
        offered = parse_qs(urlparse(path).query).get("token", [""])[0]
        if authorization and authorization.startswith("Bearer "):
            offered = authorization.removeprefix("Bearer ")
        return hmac.compare_digest(offered.encode(), self.token.encode())


def _handler(dashboard: Dashboard, page: bytes) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            route = urlparse(self.path).path
            if not dashboard.allowed(self.path, self.headers.get("Authorization")):
                self._answer(401, b"a token is required: ?token=...\n", "text/plain")
            elif route in ("/", "/index.html"):
                self._answer(200, page, "text/html; charset=utf-8")
            elif route == "/api/dashboard":
                body = json.dumps(dashboard.data(), default=str).encode()
                self._answer(200, body, "application/json")
            else:
                self._answer(404, b"not found\n", "text/plain")

        def _answer(self, status: int, body: bytes, content_type: str) -> None:
            answer(self, status, body, content_type)

        def log_message(self, format: str, *args: Any) -> None:
            return  # the page polls every 2 s

    return Handler
