"""The ``generate`` commands' shared options, and ``--to`` as a folder or a Kafka topic."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from streamsmith.cli.common import spec_for
from streamsmith.errors import UserError
from streamsmith.object_store import local_only

if TYPE_CHECKING:
    from streamsmith.generate.deliver import Topic

Chunks = Annotated[int, typer.Option("--chunks", help="Files (or produce bursts).", min=1)]
Seed = Annotated[int, typer.Option("--seed")]
OutOfOrder = Annotated[float, typer.Option("--out-of-order", help="Fraction shuffled.")]
Late = Annotated[float, typer.Option("--late", help="Fraction delayed within the watermark.")]
TooLate = Annotated[float, typer.Option("--too-late", help="Fraction delayed past it.")]
Duplicates = Annotated[float, typer.Option("--duplicates", help="Fraction re-sent.")]
Corrupt = Annotated[float, typer.Option("--corrupt", help="Fraction garbled.")]
To = Annotated[
    str | None,
    typer.Option(
        "--to", help="Directory (default: the app's input folder) or kafka://HOST:PORT/TOPIC."
    ),
]

T = TypeVar("T")


def made(make: Callable[[], T]) -> T:
    """The generator's result; its argument checks (ValueError) become user errors."""
    try:
        return make()
    except ValueError as exc:
        raise UserError(str(exc)) from None


def storage_root_of(app: str, root: str | None) -> Path:
    """The storage root the app's default spec resolves to under ``--root``."""
    return local_only(spec_for(app, root=root)[1].root, f"generate {app}")


def kafka_topic(url: str, partitions: int = 3) -> Topic:
    """``kafka://host:port/topic`` as the topic to produce to."""
    from streamsmith.generate.deliver import Topic

    if not url.startswith("kafka://") or "/" not in url[len("kafka://") :]:
        raise UserError(
            f"--to {url!r}: write kafka://HOST:PORT/TOPIC, e.g. kafka://127.0.0.1:9092/nest-logs"
        )
    servers, _, topic = url[len("kafka://") :].partition("/")
    if not servers or not topic:
        raise UserError(f"--to {url!r}: both servers and topic are needed")
    return Topic(servers, topic, partitions)


def target(app: str, to: str | None, root: str | None) -> tuple[Path | Topic, str]:
    """``--to`` as a folder (default: the app's input folder) or a topic, and as printed."""
    from streamsmith.generate.deliver import input_folder

    if to is not None and to.startswith("kafka://"):
        return kafka_topic(to), to
    if to is not None:
        return Path(to), to
    folder = local_only(input_folder(spec_for(app, root=root)[1]), f"generate {app}")
    return folder, str(folder)
