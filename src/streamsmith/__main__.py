"""``python -m streamsmith`` runs the CLI."""

from __future__ import annotations

from streamsmith.cli import main

main()
