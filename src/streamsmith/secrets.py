"""Redaction of secrets, whole and in parts, in the event log, messages and stderr logs.

A secret is shown in pieces as often as whole: a DSN's password alone or URL-encoded in
a driver's error, the password inside a JAAS configuration, a webhook URL's token. So
each registered secret brings its parts (``secret_parts``). Only registered values are
masked: a short secret is masked too, but only where it stands alone (not inside a
word), so registering ``pw`` leaves ``pwd`` and ``upward`` as they are.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
from collections.abc import Iterable
from typing import TextIO
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlsplit

REDACTED = "***"
_SHORT = 4  # a secret shorter than this is masked only where it stands alone
_JAAS_SECRET = re.compile(r"\b\w*(?:password|secret|token)\w*\s*=\s*\"([^\"]*)\"", re.IGNORECASE)
_TOKEN_SEGMENT = re.compile(r"^(?=.*\d)[\w.~-]{8,}$")  # a path segment with a digit, 8+ long
_SECRET_QUERY_KEY = re.compile(r"token|secret|key|sig|auth|pass", re.IGNORECASE)


def secret_parts(secret: str) -> list[str]:
    """``secret`` and the parts of it that are secrets alone, each also URL-encoded.

    Parts: a URL's password, its query values named like secrets (``token``, ``sig``,
    ``key``...) or looking like tokens, and its path segments that look like tokens (8+
    characters with a digit, as in ``/services/T0/B0/XyZ123abc``); a libpq
    ``password=...``; each ``password="..."`` (or ``secret``, ``token``) in a JAAS value.
    """
    if not secret:
        return []
    parts = {secret, *_jaas_parts(secret), *_url_parts(secret), *_conninfo_parts(secret)}
    encoded = {form for part in parts for form in (quote(part, safe=""), quote_plus(part))}
    return sorted(part for part in parts | encoded if part)


def _jaas_parts(secret: str) -> list[str]:
    return _JAAS_SECRET.findall(secret)


def _conninfo_parts(secret: str) -> list[str]:
    found = re.findall(r"\bpassword\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", secret, re.IGNORECASE)
    return [value[1:-1] if value.startswith("'") else value for value in found]


def _url_parts(secret: str) -> list[str]:
    if "://" not in secret:
        return []
    try:
        url = urlsplit(secret.strip())
        password = url.password
    except ValueError:  # not a URL after all (a bad port, brackets): nothing to split
        return []
    found = [unquote(password)] if password else []
    for key, value in parse_qsl(url.query + "&" + url.fragment):
        if _SECRET_QUERY_KEY.search(key) or _TOKEN_SEGMENT.match(value):
            found.append(value)  # not sslmode=require: an ordinary word stays readable
    found += [unquote(s) for s in url.path.split("/") if _TOKEN_SEGMENT.match(unquote(s))]
    return found


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` (longest first, and its JSON-escaped form)
    replaced by ``***``; one shorter than 4 characters only where it stands alone."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        for form in {secret, json.dumps(secret)[1:-1]}:
            if len(form) >= _SHORT:
                text = text.replace(form, REDACTED)
            elif form:
                text = re.sub(rf"(?<![\w]){re.escape(form)}(?![\w])", REDACTED, text)
    return text


class SecretRegistry:
    """The secrets this process knows, with their parts; safe to use from any thread."""

    def __init__(self) -> None:
        self._secrets: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def register(self, secrets: Iterable[str]) -> None:
        """Add ``secrets`` and their parts."""
        parts = {part for secret in secrets for part in secret_parts(secret)}
        with self._lock:
            self._secrets = self._secrets | parts

    @property
    def secrets(self) -> frozenset[str]:
        return self._secrets

    def redact(self, text: str) -> str:
        return redact_text(text, self._secrets) if self._secrets else text


REGISTRY = SecretRegistry()  # what stderr logging redacts: the running pipeline's secrets


class RedactingFilter(logging.Filter):
    """Replaces registered secrets in a record's message and exception text, in the record
    itself, so that every handler after this one sees the redacted text too."""

    def __init__(self, registry: SecretRegistry = REGISTRY) -> None:
        super().__init__()
        self.registry = registry

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.registry.secrets:
            return True
        record.msg, record.args = self.registry.redact(record.getMessage()), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.registry.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.registry.redact(record.stack_info)
        return True


_installed: dict[str, logging.Handler] = {}
_install_lock = threading.Lock()


def install_log_redaction(stream: TextIO | None = None) -> logging.Handler:
    """streamsmith's stderr logging (warnings and up), through a ``RedactingFilter``;
    installed once per process (later calls return the same handler)."""
    with _install_lock:
        handler = _installed.get("streamsmith")
        if handler is None:
            handler = logging.StreamHandler(stream or sys.stderr)
            handler.setLevel(logging.WARNING)
            # The bare message, as Python's last-resort handler printed it before.
            handler.addFilter(RedactingFilter())
            logging.getLogger("streamsmith").addHandler(handler)
            _installed["streamsmith"] = handler
    return handler
