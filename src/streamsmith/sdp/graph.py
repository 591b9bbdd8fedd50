"""The dataflow graph an SDP project's files declare, collected by streamsmith's own
``GraphElementRegistry``.

PySpark's ``pyspark.pipelines`` decorators (``@dp.table``, ``@dp.materialized_view``,
``@dp.temporary_view``, ``@dp.append_flow``, ``dp.create_streaming_table``...) register
into whichever registry is active; while the project's files are imported that is a
:class:`DeclaredGraph`, so users keep ``from pyspark import pipelines as dp`` unchanged.
Nothing runs at import: the flows' functions are called later, by the analysis
(``streamsmith.sdp.analysis``) and when their queries start.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.pipelines.flow import AutoCdcFlow, Flow
from pyspark.pipelines.graph_element_registry import (
    GraphElementRegistry,
    graph_element_registration_context,
)
from pyspark.pipelines.output import (
    MaterializedView,
    Output,
    Sink,
    StreamingTable,
    TemporaryView,
)
from pyspark.pipelines.source_code_location import SourceCodeLocation
from pyspark.sql import DataFrame

from streamsmith.errors import UserError
from streamsmith.sdp.expectations import Expecting, declared
from streamsmith.sdp.lakeflow import AutoCdc, OnceFlow, lakeflow_names
from streamsmith.sdp.session import PipelineSession
from streamsmith.sdp.sql import sql_elements

KINDS = {
    StreamingTable: "streaming table",
    MaterializedView: "materialized view",
    TemporaryView: "temporary view",
    Sink: "sink",
}


@dataclass(frozen=True)
class DeclaredFlow:
    """A flow as the project declares it: its function (no arguments, as SDP calls it),
    the dataset it writes, its Spark settings and where it is written; ``cdc`` for an
    AUTO CDC flow, whose function streams the change events from its source."""

    name: str
    target: str
    func: Callable[[], DataFrame]
    spark_conf: dict[str, str]
    where: str
    cdc: AutoCdc | None = None
    once: bool = False  # a Lakeflow once flow: a batch append, in the first run only
    expectations: tuple[Expecting, ...] = ()  # Lakeflow's decorators on its function


@dataclass
class DeclaredGraph(GraphElementRegistry):
    """The datasets and flows of a project, by name (see the module docstring)."""

    folder: Path
    session: PipelineSession
    database: str | None = None
    catalog: str | None = None
    outputs: dict[str, Output] = field(default_factory=dict)
    flows: dict[str, DeclaredFlow] = field(default_factory=dict)

    def key(self, name: str) -> str | None:
        """The dataset a name written in the code means (``t``, ``db.t`` or
        ``catalog.db.t`` of the pipeline's own database), or None."""
        parts = [part.strip("`") for part in name.split(".")]
        own = [p for p in (self.catalog, self.database) if p]
        prefix = parts[:-1]
        if prefix and prefix != own[-len(prefix) :]:
            return None
        return parts[-1] if parts[-1] in self.outputs else None

    def kind(self, name: str) -> str:
        output = self.outputs[name]
        return next((kind for cls, kind in KINDS.items() if isinstance(output, cls)), "dataset")

    def flows_into(self, name: str) -> list[DeclaredFlow]:
        return [flow for flow in self.flows.values() if flow.target == name]

    def where(self, location: SourceCodeLocation) -> str:
        path = Path(location.filename)
        shown = path.relative_to(self.folder) if path.is_relative_to(self.folder) else path
        return f"{shown}:{location.line_number}" if location.line_number else str(shown)

    def register_output(self, output: Output) -> None:
        name = output.name.split(".")[-1].strip("`")
        if name in self.outputs:
            raise UserError(
                f"{self.where(output.source_code_location)}: dataset {name!r} is defined "
                "twice in the pipeline"
            )
        self.outputs[name] = output

    def register_flow(self, flow: Flow) -> None:
        where = self.where(flow.source_code_location)
        if flow.name in self.flows:
            raise UserError(f"{where}: flow {flow.name!r} is defined twice in the pipeline")
        self.flows[flow.name] = DeclaredFlow(
            flow.name, flow.target.split(".")[-1].strip("`"), as_registered(flow.func),
            dict(flow.spark_conf), where, once=isinstance(flow, OnceFlow),
            expectations=declared(flow.func),
        )  # fmt: skip

    def register_auto_cdc_flow(self, flow: AutoCdcFlow | AutoCdc) -> None:
        """An AUTO CDC flow (:mod:`streamsmith.sdp.lakeflow`): its function streams the
        source's change events, which its target's table applies by key."""
        where = self.where(flow.source_code_location)
        if not isinstance(flow, AutoCdc):  # PySpark's own, made outside load_graph
            raise UserError(f"{where}: define AUTO CDC flows in the project's files")
        if flow.name in self.flows:
            raise UserError(f"{where}: flow {flow.name!r} is defined twice in the pipeline")
        session, source = self.session, flow.source

        def events() -> DataFrame:
            return session.readStream.table(source)

        target = flow.target.split(".")[-1].strip("`")
        self.flows[flow.name] = DeclaredFlow(flow.name, target, events, {}, where, flow)

    def register_sql(self, sql_text: str, file_path: Path) -> None:
        shown = file_path.relative_to(self.folder) if file_path.is_absolute() else file_path
        for element in sql_elements(sql_text, shown, self.session):
            if isinstance(element, AutoCdc):
                self.register_auto_cdc_flow(element)
            elif isinstance(element, Flow):
                self.register_flow(element)
            else:
                self.register_output(element)

    def check(self) -> None:
        """Every flow writes a dataset of the graph; every dataset but a streaming table
        made for append flows has its flow."""
        for flow in self.flows.values():
            if flow.target not in self.outputs:
                raise UserError(
                    f"{flow.where}: flow {flow.name!r} writes {flow.target!r}, which the "
                    "pipeline does not define (dp.create_streaming_table it first)"
                )
            into = self.flows_into(flow.target)
            changed = [f.name for f in into if f.cdc is not None]
            plain = [f.name for f in into if f.cdc is None]
            if changed and plain:
                raise UserError(
                    f"{flow.where}: {flow.target!r} takes AUTO CDC flow {changed[0]!r} and "
                    f"flow {plain[0]!r}: a table takes AUTO CDC flows or append flows, not both"
                )
        for name, output in self.outputs.items():
            if not self.flows_into(name):
                raise UserError(
                    f"{self.where(output.source_code_location)}: {self.kind(name)} {name!r} "
                    "has no flow writing it: add an @dp.append_flow(target=...)"
                )


def as_registered(func: Callable[[], DataFrame]) -> Callable[[], DataFrame]:
    """``func`` seeing the values its names had when it was registered.

    SDP calls a flow's function as it registers it, so a table made in a ``for`` loop
    reads the loop's value of that turn; streamsmith calls it later (each time a query
    starts). So the function is called with its closure's cells and its module's
    globals as they were at registration; a global defined later in the file (a helper
    below the flow) is looked up when the function is called.
    """
    if not isinstance(func, types.FunctionType):
        return func
    snapshot = dict(func.__globals__)
    live = func.__globals__
    cells = tuple(_frozen_cell(cell) for cell in func.__closure__ or ())
    frozen = types.FunctionType(
        func.__code__, snapshot, func.__name__, func.__defaults__, cells or None
    )
    frozen.__kwdefaults__ = func.__kwdefaults__

    def call() -> DataFrame:
        for name, value in live.items():
            snapshot.setdefault(name, value)
        result: DataFrame = frozen()
        return result

    call.__name__ = call.__qualname__ = func.__name__
    return call


def _frozen_cell(cell: types.CellType) -> types.CellType:
    """A copy of ``cell`` holding its value now (an empty one, not bound yet, as it is)."""
    try:
        return types.CellType(cell.cell_contents)
    except ValueError:
        return cell


def load_graph(
    files: Sequence[Path],
    folder: Path,
    session: PipelineSession,
    *,
    catalog: str | None = None,
    database: str | None = None,
) -> DeclaredGraph:
    """Import the project's Python files and register its SQL files, in order, into a
    new :class:`DeclaredGraph`; each Python file sees ``spark`` as SDP gives it."""
    graph = DeclaredGraph(folder.resolve(), session, database=database, catalog=catalog)
    with graph_element_registration_context(graph), lakeflow_names():
        for file in files:
            if file.suffix == ".sql":
                graph.register_sql(file.read_text(encoding="utf-8"), file)
            else:
                with _user_code(file):
                    _import(file, session)
    graph.check()
    return graph


def _import(file: Path, session: PipelineSession) -> None:
    spec = importlib.util.spec_from_file_location(file.stem, str(file))
    if spec is None or spec.loader is None:
        raise UserError(f"{file}: not a Python file Python can import")
    module = importlib.util.module_from_spec(spec)
    module.__dict__["spark"] = session
    sys.path.insert(0, str(file.parent))  # its sibling modules import by name, as in SDP
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(file.parent))


@contextmanager
def _user_code(file: Path) -> Iterator[None]:
    """An error raised while ``file`` is imported, as one line naming the file and the
    line of the user's code that raised it."""
    try:
        yield
    except UserError:
        raise
    except Exception as exc:  # the user's code: any error is theirs to see, in one line
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(file)]
        line = f":{frames[-1].lineno}" if frames else ""
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise UserError(f"{file}{line}: {type(exc).__name__}: {message}") from exc
