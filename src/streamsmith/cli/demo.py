"""``demo``: an app end to end on generated data (the work is in :mod:`streamsmith.demo`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from streamsmith.cli.common import out
from streamsmith.errors import UserError


def demo(
    app: Annotated[
        str,
        typer.Argument(
            help="secops (the security platform), cloudtrail (files), nest (Kafka) or "
            "signals (PostgreSQL)"
        ),
    ] = "secops",
    root: Annotated[
        Path | None,
        typer.Option(
            "--root",
            help="Demo storage root: a new or empty folder, or one an earlier demo made "
            "(cleared first); any other folder is refused.",
        ),
    ] = None,
) -> None:
    """Run an app end to end on generated data and show what landed."""
    from streamsmith.demo import (
        run_cloudtrail_demo,
        run_nest_demo,
        run_secops_demo,
        run_signals_demo,
    )

    if app == "secops":
        run_secops_demo(root or Path("streamsmith-demo"), devices=20, console=out)
    elif app == "cloudtrail":
        run_cloudtrail_demo(
            root or Path("streamsmith-demo-cloudtrail"), files=40, records_per_file=250,
            console=out,
        )  # fmt: skip
    elif app == "nest":
        run_nest_demo(root or Path("streamsmith-demo-nest"), devices=60, events=3000, console=out)
    elif app == "signals":
        run_signals_demo(
            root or Path("streamsmith-demo-signals"), devices=8, events=3000, console=out
        )
    else:
        raise UserError(f"no demo for {app!r}: choose secops, cloudtrail, nest or signals")
