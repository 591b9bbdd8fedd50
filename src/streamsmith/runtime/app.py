"""How an app declares itself: named flows, each a pure transform, plus a default spec."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

Transform = Callable[..., DataFrame]


@dataclass(frozen=True)
class FlowDefinition:
    """The code half of a flow; the spec supplies its source, sink and trigger.

    ``transform`` maps the source frame to the output. With ``quarantine`` set, the
    output is a tagged frame (see ``streamsmith.transforms.quarantine``): rejected rows go
    to the table's quarantine table and accepted rows to the table. ``lookups`` name
    static lake tables passed to the transform as keyword arguments (stream-static
    joins); Spark re-reads them every micro-batch, so they may be replaced while the
    stream runs.
    """

    name: str
    transform: Transform
    description: str = ""
    record_schema: StructType | None = None
    quarantine: bool = True
    lookups: tuple[str, ...] = ()


@dataclass(frozen=True)
class App:
    """A reference application: what it does, its flows, and the spec it runs with by default."""

    name: str
    description: str
    flows: tuple[FlowDefinition, ...]
    default_spec: Mapping[str, Any]
    input_hint: str = ""

    def flow(self, name: str) -> FlowDefinition:
        """The flow called ``name``."""
        for flow in self.flows:
            if flow.name == name:
                return flow
        raise KeyError(name)
