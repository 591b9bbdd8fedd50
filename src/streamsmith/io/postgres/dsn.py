"""Which PostgreSQL server a pipeline writes to, without ever showing its password."""

from __future__ import annotations

import os
import re

from streamsmith.config import PipelineSpec
from streamsmith.errors import UserError


def dsn_origin(spec: PipelineSpec) -> str:
    """Where the DSN comes from, for ``dry-run``: never the DSN itself."""
    settings = spec.postgres
    if settings.dsn is not None:
        return "postgres.dsn in the spec"
    if os.environ.get(settings.dsn_env):
        return f"${settings.dsn_env}"
    return f"the embedded server in {spec.root / 'postgres'} (streamsmith db start)"


def resolve_dsn(spec: PipelineSpec) -> str:
    """The DSN postgres sinks use: the spec's, else ``$<dsn_env>``, else the embedded server."""
    settings = spec.postgres
    if settings.dsn is not None:
        return settings.dsn.get_secret_value()
    from_env = os.environ.get(settings.dsn_env)
    if from_env:
        return from_env
    from streamsmith.io.postgres.server import embedded_home, postgres_status

    server = postgres_status(embedded_home(spec.root))
    if server is None:
        raise UserError(
            f"no PostgreSQL server for the postgres sinks: start the embedded one with "
            f"`streamsmith db start --root {spec.root}`, or set postgres.dsn in the spec "
            f"or ${settings.dsn_env}"
        )
    return str(server.dsn)


def mask_dsn(dsn: str) -> str:
    """``dsn`` with its password replaced by ``***`` (key=value and URI forms)."""
    masked = re.sub(r"(password\s*=\s*)('[^']*'|\S+)", r"\1***", dsn, flags=re.IGNORECASE)
    return re.sub(r"(://[^:/@\s]+:)[^@\s]+@", r"\1***@", masked)


def dsn_secrets(dsn: str) -> list[str]:
    """What of ``dsn`` must never be shown: the DSN itself and its password."""
    if not dsn:
        return []
    from psycopg.conninfo import conninfo_to_dict

    password = conninfo_to_dict(dsn).get("password")
    return [dsn, *([str(password)] if password else [])]
