"""How an app declares itself: named flows, each a pure transform, plus a default spec."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from streamsmith.transforms.expectations import Expectation

Transform = Callable[..., DataFrame]


@dataclass(frozen=True)
class EventTime:
    """The event-time rule of a stateful flow, as its transform applies it.

    ``column`` carries the watermark, ``delay`` is how late data may be; ``window`` and
    ``slide`` describe the windows the stateful operator groups by (none for dedup). The
    runtime uses them to record the rows Spark drops as too late (``<table>_late``).
    """

    column: str
    delay: str
    window: str | None = None
    slide: str | None = None


@dataclass(frozen=True)
class StreamInput:
    """A further streaming input of a flow: the other side of a stream-stream join.

    The spec says which source feeds it (``flows.<flow>.streams.<name>``); ``prepare``
    parses that source into events, and only its accepted events reach the transform,
    as the keyword argument ``name`` (rejects are the quarantine of the flow that owns
    that source).
    """

    name: str
    prepare: Transform
    record_schema: StructType | None = None


@dataclass(frozen=True)
class FlowDefinition:
    """The code half of a flow; the spec supplies its source, sink and trigger.

    ``transform`` maps the source frame to the output. When ``prepare`` is given, the
    flow has two stages: ``prepare`` parses the source into a tagged frame of events
    (rejects go to quarantine) and ``transform`` maps the accepted events to the output;
    stateful flows need this split because an aggregate cannot carry rejected rows.
    ``event_time`` declares the watermark of a stateful flow (see :class:`EventTime`);
    ``stateful`` says whether the output is an aggregate, which decides the output
    modes it can use. ``record_late`` runs the companion query recording the events the
    watermark drops (off for a second flow over the same events and rule).

    With ``quarantine`` set, the output of ``prepare`` (or of ``transform`` when there
    is no ``prepare``) is a tagged frame (see
    ``streamsmith.transforms.quarantine``): rejected rows go to the table's quarantine
    table and accepted rows on. ``lookups`` name
    static lake tables passed to the transform as keyword arguments (stream-static
    joins); Spark lists their files again every micro-batch, so a replaced table is
    joined from the next micro-batch on. ``streams`` are further streaming inputs (see
    :class:`StreamInput`), passed to the transform as keyword arguments too. ``models``
    name models under ``<storage_root>/models``; the transform gets ``models``, a dict
    from each name to the path of its current parameters (which may not exist yet).
    ``batch_arguments`` are keyword arguments the transform gets in batch runs only
    (backfill), e.g. ``close_at_end=True`` for a stateful processor whose open groups a
    stream's timers would close later: the edge decides, the transform never asks
    whether its input is a stream. ``expectations`` are rules the flow's records should
    meet (see ``streamsmith.transforms.expectations``); the spec may add more.
    ``from_spec``: the spec names the flow's code and event time (a pipeline of your own,
    ``streamsmith.pipelines``), so ``flows.<flow>.transform``, ``sql`` and ``event_time``
    are read; a reference app's code fixes them.
    """

    name: str
    transform: Transform
    description: str = ""
    record_schema: StructType | None = None
    quarantine: bool = True
    lookups: tuple[str, ...] = ()
    streams: tuple[StreamInput, ...] = ()
    models: tuple[str, ...] = ()
    prepare: Transform | None = None
    event_time: EventTime | None = None
    stateful: bool = False
    record_late: bool = True
    batch_arguments: Mapping[str, Any] = field(default_factory=dict)
    expectations: tuple[Expectation, ...] = ()
    from_spec: bool = False


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
