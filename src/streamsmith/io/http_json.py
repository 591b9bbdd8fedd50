"""One JSON POST: what the webhook sink delivers each row with and the notifier each event.

It sits in ``io`` so the sink needs nothing from ``monitor`` (which is above ``io``).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping
from typing import Any


def post_json(
    url: str, event: Mapping[str, Any], timeout: float, idempotency_key: str | None = None
) -> None:
    """POST ``event`` as JSON; any answer but 2xx is a failure."""
    headers = {"Content-Type": "application/json", "User-Agent": "streamsmith"}
    if idempotency_key:
        headers["Idempotency-Key"] = idempotency_key
    request = urllib.request.Request(
        url, data=json.dumps(event, default=str).encode(), headers=headers, method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        if not 200 <= response.status < 300:
            raise OSError(f"webhook answered HTTP {response.status}")
