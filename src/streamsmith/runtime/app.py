"""How an app declares itself: named flows, each a pure transform, plus a default spec."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from streamsmith.config import spark_duration
from streamsmith.errors import UserError
from streamsmith.io.delta import NO_SETTINGS, TableSettings
from streamsmith.transforms.expectations import Expectation

Transform = Callable[..., DataFrame]


@dataclass(frozen=True)
class EventTime:
    """A flow's event time, declared once: the watermark, the windows and the
    late-events table all follow it.

    ``column`` holds the event time and carries the watermark; ``lateness`` is how late
    an event may arrive and still count (the watermark delay). ``window`` (with
    ``slide`` for sliding windows) gives the flow's events a ``window`` column to group
    by; ``gap`` is the inactivity that closes a session, for a flow that keeps sessions
    itself (a stateful processor reads it from ``event_time``). The code gives the
    defaults; the spec's ``flows.<flow>.event_time`` overrides any of them.
    """

    column: str
    lateness: str
    window: str | None = None
    slide: str | None = None
    gap: str | None = None

    def __post_init__(self) -> None:
        for name in ("lateness", "window", "slide", "gap"):
            value = getattr(self, name)
            if value is not None:
                try:  # as Spark reads it, whichever spelling was given (2h -> 2 hours)
                    object.__setattr__(self, name, spark_duration(value))
                except ValueError as exc:
                    raise UserError(f"event time {name}: {exc}") from None
        if self.slide is not None and self.window is None:
            raise UserError("event time slide is the step of sliding windows: set window too")

    def merged(self, **changes: str | None) -> EventTime:
        """This rule with the given fields replaced (None leaves a field as it is)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


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
    # Other flows may write its Delta table too (SDP's append flows into one table, or
    # its AUTO CDC flows: a cdc flow's batches merge, so only cdc flows do alike).
    appends_with_others: bool = False

    @property
    def applies_event_time(self) -> bool:
        """Whether the transform takes the resolved rule (a parameter ``event_time``) and
        applies it itself; otherwise the runtime watermarks and windows its events."""
        return takes_parameter(self.transform, "event_time")


def takes_parameter(function: Callable[..., Any], name: str) -> bool:
    """Whether ``function`` has a parameter called ``name`` (``**kwargs`` does not count)."""
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):  # a builtin without a signature takes nothing by name
        return False
    parameter = parameters.get(name)
    return parameter is not None and parameter.kind is not inspect.Parameter.VAR_KEYWORD


@dataclass(frozen=True)
class ViewDefinition:
    """A materialized view whose query is code (a Spark Declarative Pipelines
    ``@dp.materialized_view``): ``query(spark)`` builds the frame each refresh writes,
    reading the pipeline's tables ``reads`` (the spec's views are SQL instead). With
    ``once_into``, the query is a once flow's (Lakeflow's ``append_flow(once=True)``):
    its rows are appended to that table in the first run, and not again until a full
    refresh removes the table."""

    name: str
    query: Callable[[SparkSession], DataFrame]
    reads: tuple[str, ...] = ()
    description: str = ""
    partition_by: tuple[str, ...] = ()
    once_into: str | None = None
    settings: TableSettings = NO_SETTINGS  # its Delta table's properties and clustering


@dataclass(frozen=True)
class App:
    """A reference application: what it does, its flows, and the spec it runs with by default."""

    name: str
    description: str
    flows: tuple[FlowDefinition, ...]
    default_spec: Mapping[str, Any]
    input_hint: str = ""
    views: tuple[ViewDefinition, ...] = ()

    def flow(self, name: str) -> FlowDefinition:
        """The flow called ``name``."""
        for flow in self.flows:
            if flow.name == name:
                return flow
        raise KeyError(name)
