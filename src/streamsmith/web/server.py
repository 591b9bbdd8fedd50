"""``streamsmith dashboard``: the page and its JSON, served from the event log.

It reads what the log gained at every request, so it shows a run live and keeps showing
it after the run ended. The page shows error messages and table names, so every request
needs a token (``?token=…`` or ``Authorization: Bearer …``, compared in constant time),
even on loopback, which every local user reaches: one given must be long enough to resist
guessing, else a strong one is generated. A request whose ``Host`` header is not a
loopback name (or one allowed explicitly) is refused, so a web page cannot reach the
dashboard through DNS rebinding; answers forbid MIME sniffing and the page runs under a
Content-Security-Policy that allows its own inline script (by hash) and nothing remote.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from streamsmith.errors import UserError
from streamsmith.monitor.eventlog import LogFollower
from streamsmith.monitor.metrics import answer
from streamsmith.web.data import DashboardFold

MIN_TOKEN_LENGTH = 16
# A token of few different characters ("aaaa...", "1234" repeated) is found by guessing
# however long it is; 16 random characters of any usual alphabet have more than this.
MIN_TOKEN_CHARACTERS = 8
_MAKE_ONE = "e.g. `python -c 'import secrets; print(secrets.token_urlsafe())'`"


def check_token(token: str) -> None:
    """Refuse a dashboard token short or simple enough to guess, in one line."""
    if len(token) < MIN_TOKEN_LENGTH:
        raise UserError(
            f"the dashboard token is {len(token)} characters long: give one of at least "
            f"{MIN_TOKEN_LENGTH} ({_MAKE_ONE}), or none to have one generated"
        )
    kinds = len(set(token))
    if kinds < MIN_TOKEN_CHARACTERS:
        raise UserError(
            f"the dashboard token has too few different characters ({kinds}; at least "
            f"{MIN_TOKEN_CHARACTERS}): give a random one ({_MAKE_ONE}), or none to have one "
            "generated"
        )


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
_WILDCARDS = ("", "0.0.0.0", "::")


class Dashboard:
    """The dashboard's HTTP server, running on a background thread."""

    def __init__(
        self,
        root: Path,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        allowed_hosts: Iterable[str] = (),
    ) -> None:
        if token is not None:
            check_token(token)
        self.root = root
        self.token = token or secrets.token_urlsafe(32)
        names = [*LOOPBACK_NAMES, *allowed_hosts, *([] if host in _WILDCARDS else [host])]
        self.allowed_hosts = frozenset(name.lower().strip("[]") for name in names)
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
    def address(self) -> str:
        """Where the page is, without its token: what may be printed."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    @property
    def url(self) -> str:
        """The page's address with its token: a secret, for the browser only."""
        return f"{self.address}?token={self.token}"

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

    def known_host(self, header: str | None) -> bool:
        """Whether a request's ``Host`` names this server by a name it answers to (any
        port: the header carries the one the browser used)."""
        if not header:
            return False
        name = re.sub(r":\d+$", "", header.strip()).lower().strip("[]")
        return name in self.allowed_hosts

    def allowed(self, path: str, authorization: str | None) -> bool:
        offered = parse_qs(urlparse(path).query).get("token", [""])[0]
        if authorization and authorization.startswith("Bearer "):
            offered = authorization.removeprefix("Bearer ")
        return hmac.compare_digest(offered.encode(), self.token.encode())


def content_policy(page: bytes) -> str:
    """The page's Content-Security-Policy: its own inline script (by hash), inline styles,
    requests to itself only; no frames, forms, plug-ins or base URL."""
    scripts = re.findall(rb"<script>(.*?)</script>", page, flags=re.DOTALL)
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(script).digest()).decode()}'"
        for script in scripts
    )
    return (
        f"default-src 'none'; script-src {hashes}; style-src 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )


def _handler(dashboard: Dashboard, page: bytes) -> type[BaseHTTPRequestHandler]:
    policy = content_policy(page)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            route = urlparse(self.path).path
            if not dashboard.known_host(self.headers.get("Host")):
                self._answer(421, b"unknown Host: use http://127.0.0.1:PORT/\n", "text/plain")
            elif not dashboard.allowed(self.path, self.headers.get("Authorization")):
                self._answer(401, b"a token is required: ?token=...\n", "text/plain")
            elif route in ("/", "/index.html"):
                self._answer(200, page, "text/html; charset=utf-8")
            elif route == "/api/dashboard":
                body = json.dumps(dashboard.data(), default=str).encode()
                self._answer(200, body, "application/json")
            else:
                self._answer(404, b"not found\n", "text/plain")

        def _answer(self, status: int, body: bytes, content_type: str) -> None:
            answer(self, status, body, content_type, {"Content-Security-Policy": policy})

        def log_message(self, format: str, *args: Any) -> None:
            return  # the page polls every 2 s

    return Handler
