"""Redaction of secrets and their parts: DSN passwords, JAAS passwords, webhook tokens,
short secrets, and log lines on stderr."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from streamsmith.monitor.eventlog import EventLog, read_events
from streamsmith.secrets import (
    RedactingFilter,
    SecretRegistry,
    install_log_redaction,
    redact_text,
    secret_parts,
)

DSN = "postgresql://app:p@ss w0rd!@db.example:5432/lake?sslmode=require"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="alice" password="k4fka-Pw";'
)
WEBHOOK = "https://hooks.example.com/services/T0123456/B0123456/XyZ987abcDEF?token=tk9"


def test_a_dsn_password_is_a_secret_alone_and_url_encoded() -> None:
    dsn = "postgresql://app:p%40ss%20w0rd%21@db.example:5432/lake?sslmode=require"
    parts = secret_parts(dsn)
    assert {"p@ss w0rd!", "p%40ss%20w0rd%21", "p%40ss+w0rd%21"} <= set(parts)
    assert "require" not in parts and "lake" not in parts  # ordinary words stay readable
    assert "pw1" in secret_parts("host=h dbname=d user=u password=pw1")
    text = "auth failed for p@ss w0rd! (sent p%40ss%20w0rd%21), sslmode=require"
    assert redact_text(text, parts) == "auth failed for *** (sent ***), sslmode=require"


def test_the_password_in_a_jaas_config_and_a_webhook_token_are_secrets_alone() -> None:
    assert "k4fka-Pw" in secret_parts(JAAS)
    assert "alice" not in secret_parts(JAAS)
    parts = set(secret_parts(WEBHOOK))
    assert {"T0123456", "B0123456", "XyZ987abcDEF", "tk9"} <= parts
    assert "services" not in parts and "hooks.example.com" not in parts
    text = "POST failed: token XyZ987abcDEF rejected; query token=tk9"
    assert redact_text(text, parts) == "POST failed: token *** rejected; query token=***"


def test_a_short_secret_is_masked_where_it_stands_alone_only() -> None:
    assert redact_text("password pw, upward pwd pw.", ["pw"]) == "password ***, upward pwd ***."
    assert redact_text("a b", []) == "a b"  # nothing registered: nothing masked


def test_the_event_log_redacts_secret_parts(tmp_path: Path) -> None:
    log = EventLog(tmp_path, "app", secrets=[JAAS, WEBHOOK, "x7"])
    log.write({"event": "failure", "message": "login k4fka-Pw refused; key x7; to XyZ987abcDEF"})
    assert read_events(tmp_path, "app")[0]["message"] == "login *** refused; key ***; to ***"
    assert "k4fka" not in log.path.read_text()


def test_log_lines_and_logged_exceptions_on_stderr_carry_no_registered_secret() -> None:
    registry = SecretRegistry()
    registry.register([DSN.replace("p@ss w0rd!", "s3cr%2Fet"), "ab"])
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter(registry))
    logger = logging.getLogger("streamsmith.test_secrets")
    logger.addHandler(handler)
    try:
        logger.warning("connect with %s and ab failed", "s3cr/et")
        try:
            raise RuntimeError("password s3cr%2Fet refused")
        except RuntimeError:
            logger.exception("batch failed")
    finally:
        logger.removeHandler(handler)
    written = stream.getvalue()
    assert written.splitlines()[0] == "connect with *** and *** failed"
    assert "RuntimeError: password *** refused" in written
    assert "s3cr" not in written


def test_streamsmith_stderr_logging_redacts_through_the_process_registry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streamsmith import secrets

    monkeypatch.setattr(secrets, "_installed", {})
    stream = io.StringIO()
    handler = install_log_redaction(stream)
    try:
        assert install_log_redaction() is handler  # once per process
        secrets.REGISTRY.register([JAAS])  # what a run's Monitor does
        logging.getLogger("streamsmith.io.test").warning("jaas password k4fka-Pw")
    finally:
        logging.getLogger("streamsmith").removeHandler(handler)
    assert stream.getvalue() == "jaas password ***\n"
