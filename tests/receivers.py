"""Local notification receivers for the tests: an HTTP webhook and an SMTP server.

Both listen on 127.0.0.1 (free ports) and keep what they receive, so a test can assert
on the notifications a run sent.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller

from streamsmith.processes import free_port


@dataclass
class Received:
    """What the receivers got: webhook JSON bodies and e-mail messages."""

    posts: list[dict[str, Any]] = field(default_factory=list)
    mails: list[Message] = field(default_factory=list)
    webhook_url: str = ""
    smtp_port: int = 0

    def wait_for(self, condition: Callable[[Received], bool], timeout_s: float = 30) -> bool:
        """Whether ``condition`` holds within ``timeout_s`` (deliveries are asynchronous)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if condition(self):
                return True
            time.sleep(0.05)
        return condition(self)

    def events(self) -> list[str]:
        return [str(post.get("event")) for post in self.posts]

    def spec_sets(self) -> list[str]:
        """``--set`` values pointing a pipeline's notifications at these receivers."""
        return [
            f"notify.webhook={self.webhook_url}",
            "notify.smtp.host=127.0.0.1",
            f"notify.smtp.port={self.smtp_port}",
            "notify.smtp.sender=streamsmith@localhost",
            "notify.smtp.recipients=[oncall@localhost]",
        ]


class _SmtpHandler:
    def __init__(self, received: Received) -> None:
        self.received = received

    async def handle_DATA(self, _server: Any, _session: Any, envelope: Any) -> str:
        self.received.mails.append(message_from_bytes(envelope.content))
        return "250 OK"


@contextmanager
def notification_receivers() -> Iterator[Received]:
    received = Received()

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            received.posts.append(json.loads(self.rfile.read(length)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            return

    http = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    received.smtp_port = free_port()
    smtp = Controller(_SmtpHandler(received), hostname="127.0.0.1", port=received.smtp_port)
    smtp.start()
    received.webhook_url = f"http://127.0.0.1:{http.server_address[1]}/hook"
    try:
        yield received
    finally:
        smtp.stop()
        http.shutdown()
        http.server_close()
