"""Generated input delivered where an app reads it, and the lookup tables its flows join.

Input goes to files in a folder or records in a Kafka topic, created if missing; lookup
tables are replaced whole under the storage root. The ``generate`` commands and the demos
both go through these functions, so a topic gets the same partitions and a table the same
place whichever of them wrote it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamsmith.errors import UserError
from streamsmith.generate import produce_all
from streamsmith.generate.events import EventData, publish_chunks, write_chunks
from streamsmith.generate.nest import NestData, publish
from streamsmith.generate.secops import SOURCES, SecopsData, publish_secops, write_secops
from streamsmith.generate.ysb import YsbData, write_ysb

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from streamsmith.config import PipelineSpec


@dataclass(frozen=True)
class Topic:
    """A Kafka topic to produce to, created with ``partitions`` if it does not exist."""

    servers: str
    name: str
    partitions: int = 3

    def create(self) -> bool:
        """Create the topic unless it exists; True if this call created it."""
        from streamsmith.io.kafka.client import ensure_topic

        return ensure_topic(self.servers, self.name, self.partitions)


def input_folder(spec: PipelineSpec) -> Path:
    """The folder the spec's first source reads: where generated files go by default."""
    source = next(iter(spec.sources))
    folder = spec.source_path(source)
    if folder is None:
        raise UserError(f"source {source} of app {spec.app} reads no folder: pass --to")
    return folder


def deliver_events(data: EventData, target: Path | Topic, prefix: str) -> None:
    """Event chunks as JSON-lines files ``<prefix>-NNNNN.json``, or records in a topic."""
    if isinstance(target, Topic):
        target.create()
        publish_chunks(data, target.servers, target.name)
    else:
        write_chunks(data, target, prefix)


def deliver_nest(data: NestData, topic: Topic) -> int:
    """The Nest snapshots on ``topic``; returns how many were acknowledged."""
    topic.create()
    return publish(data, topic.servers, topic.name)


def deliver_secops(data: SecopsData, target: Path | Topic, numbers: range | None = None) -> None:
    """The security logs: ``auth/``, ``dhcp/`` and ``flows/`` under a folder (only the
    chunks ``numbers``, default all), or one topic per source, ``<topic name>-<source>``."""
    if isinstance(target, Topic):
        for source in SOURCES:
            Topic(target.servers, f"{target.name}-{source}", target.partitions).create()
        publish_secops(data, target.servers, target.name)
    else:
        write_secops(data, target, numbers)


def deliver_ysb(data: YsbData, target: Path | Topic) -> None:
    """YSB ad events as JSON-lines files or unkeyed records in a topic."""
    if isinstance(target, Topic):
        target.create()
        produce_all(target.servers, target.name, data.lines, [None] * len(data.lines))
    else:
        write_ysb(data, target)


def replace_lookup(
    root: Path, table: str, rows: Sequence[Sequence[Any]], schema: StructType
) -> Path:
    """Replace a lookup table under the storage root whole; returns its folder."""
    from streamsmith.io.lake import replace_static_table, table_path

    path = table_path(root, table)
    replace_static_table(path, rows, schema)
    return path


def write_device_locations(data: NestData, root: Path) -> Path:
    """The Nest app's ``device_locations`` table, for the cameras in ``data``."""
    from streamsmith.schemas.nest import DEVICE_LOCATIONS_SCHEMA

    return replace_lookup(root, "device_locations", data.locations, DEVICE_LOCATIONS_SCHEMA)


def write_assets(data: SecopsData, root: Path) -> Path:
    """The security platform's ``assets`` inventory, for the network in ``data``."""
    from streamsmith.schemas.security import ASSETS_SCHEMA

    return replace_lookup(root, "assets", data.assets, ASSETS_SCHEMA)


def write_campaigns(data: YsbData, root: Path) -> Path:
    """YSB's ``ysb_campaigns`` table (ad -> campaign), for the ads in ``data``."""
    from streamsmith.schemas.ysb import CAMPAIGNS_SCHEMA

    return replace_lookup(root, "ysb_campaigns", data.campaigns, CAMPAIGNS_SCHEMA)
