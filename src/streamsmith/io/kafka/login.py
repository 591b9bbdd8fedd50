"""Logging in to a broker streamsmith started, the way its other servers let their users in.

Loopback keeps other machines out, not other users of this machine. So the broker
``streamsmith broker start`` (or the demo, or ``streamsmith.testing``) starts accepts
SASL/PLAIN only: its one listener and its controller's admit the user ``streamsmith``
with a secret generated for it, kept 0600 in ``<cache>/secrets/broker/<host>-<port>``
(``streamsmith.spark.auth``, as the cluster's and the JDBC server's are). streamsmith's
own clients find that secret by the broker's address and log in with it: librdkafka
clients (:func:`librdkafka_login`: the sources and sinks of streamsmith's connector,
the event-log producer, the generators, the admin client) and Spark's connector
(:func:`jvm_login`). Settings a user gives (``kafka.security.protocol`` and the like)
win: a broker of someone else's is logged in to as the user says.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from streamsmith.secrets import REGISTRY
from streamsmith.spark import auth

USER = "streamsmith"
MECHANISM = "PLAIN"
PROTOCOL = "SASL_PLAINTEXT"
_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def broker_secret(servers: str) -> str | None:
    """The secret of streamsmith's broker at ``servers`` (one ``host:port``), when one of
    ours started there; None otherwise (another broker, or several servers)."""
    address = servers.strip().strip(",")
    if "," in address:
        return None
    if address.startswith("localhost:"):  # the broker listens on 127.0.0.1 only
        address = "127.0.0.1:" + address.split(":", 1)[1]
    path = auth.existing_secret(auth.BROKER, address)
    if path is None:
        return None
    secret = path.read_text(encoding="utf-8").strip()
    REGISTRY.register([secret])  # never shown in a log or an event
    return secret or None


def server_secret(address: str) -> str:
    """The secret for streamsmith's broker starting at ``address``: the one an earlier
    broker there had (clients running across a restart keep logging in), else a new
    one, written 0600."""
    path = auth.existing_secret(auth.BROKER, address)
    secret = path.read_text(encoding="utf-8").strip() if path is not None else ""
    if not secret:
        secret = auth.new_secret(auth.BROKER, address)[1]
    REGISTRY.register([secret])
    return secret


def forget_server_secret(address: str) -> None:
    """No login at ``address`` any more: a broker without authentication starts there."""
    auth.forget_secret(auth.BROKER, address)


def jaas_config(user: str, secret: str) -> str:
    """A client's JAAS line for SASL/PLAIN, as Java clients take it."""
    return f'{_LOGIN_MODULE} required username="{user}" password="{secret}";'


def librdkafka_login(conf: Mapping[str, Any]) -> dict[str, Any]:
    """``conf`` (librdkafka settings) with streamsmith's login to its own broker at
    ``bootstrap.servers``, unless the settings already say how to connect."""
    return _logged_in(
        conf,
        "",
        lambda secret: {"sasl.username": USER, "sasl.password": secret},
    )


def jvm_login(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` (Spark's Kafka connector's, ``kafka.``-prefixed) with streamsmith's
    login to its own broker at ``kafka.bootstrap.servers``, unless they say how to
    connect already."""
    return _logged_in(
        options, "kafka.", lambda secret: {"kafka.sasl.jaas.config": jaas_config(USER, secret)}
    )


V = TypeVar("V")


def _logged_in(
    conf: Mapping[str, V], prefix: str, credentials: Callable[[str], dict[str, str]]
) -> dict[str, Any]:
    """``conf`` with SASL/PLAIN and the ``credentials`` of the broker's secret, when
    ``conf`` names one of streamsmith's brokers and sets no security protocol."""
    found: dict[str, Any] = dict(conf)
    keys = {str(key).lower(): key for key in found}
    servers = keys.get(f"{prefix}bootstrap.servers")
    if f"{prefix}security.protocol" in keys or servers is None:
        return found
    secret = broker_secret(str(found[servers]))
    if secret is not None:
        found[f"{prefix}security.protocol"] = PROTOCOL
        found[f"{prefix}sasl.mechanism"] = MECHANISM
        found |= credentials(secret)
    return found
