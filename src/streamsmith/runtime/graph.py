"""The dependency graph of a pipeline's flows: which flow reads which flow's table.

A flow whose source is another flow's Delta table (bronze -> silver -> gold) depends on
that flow: it starts after it (the table must exist before a stream can read it), a
catch-up runs it once that flow has finished, and a full refresh of a table rebuilds the
tables read from it. Checked before a JVM starts: a table no flow writes, a table read as
a stream that is not Delta or is rewritten by its flow, and a cycle are errors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from streamsmith.config import PipelineSpec, SourceSpec
from streamsmith.errors import UserError


def dependency_order(upstream: Mapping[str, Iterable[str]]) -> list[str]:
    """The names of ``upstream`` (name -> the names it reads from), each after those it
    reads from, otherwise in the order given; a cycle is a :class:`UserError` naming it."""
    order: list[str] = []
    done: set[str] = set()
    path: list[str] = []

    def visit(name: str) -> None:
        if name in done:
            return
        if name in path:
            # As the data flows: each flow's table is read by the next.
            cycle = " -> ".join(reversed([*path[path.index(name) :], name]))
            raise UserError(
                f"flows {cycle} read each other's tables in a cycle: a flow can read only "
                "the tables of flows that do not read its own; break the cycle"
            )
        path.append(name)
        for other in upstream[name]:
            if other in upstream:
                visit(other)
        path.pop()
        done.add(name)
        order.append(name)

    for name in upstream:
        visit(name)
    return order


def check_table_reads(spec: PipelineSpec) -> None:
    """Every Delta source naming a table reads one a flow of the pipeline writes as Delta,
    in a way a stream can follow: a flow that merges (update, cdc) or overwrites (complete)
    its table changes rows, which a stream of appended rows cannot take."""
    writers: dict[str, tuple[str, str, str]] = {}
    for name, flow in spec.flows.items():
        for _, sink in flow.named_sinks:
            table = sink.settings.get("table")
            # A cdc flow merges its changes in, whatever its output mode says.
            written: str = "cdc" if flow.cdc is not None else sink.output_mode
            # A flow writing a table of one name to PostgreSQL and to Delta: the Delta
            # one is what a stream reads.
            if isinstance(table, str) and writers.get(table, ("", "", ""))[1] != "delta":
                writers[table] = (name, sink.format, written)
    for flow_name, source_name, source in _table_reads(spec):
        table = source.table
        where = f"flow {flow_name!r} reads table {table!r} (source {source_name!r})"
        if table not in writers:
            known = ", ".join(sorted(t for t, w in writers.items() if w[1] == "delta"))
            raise UserError(
                f"{where}, which no flow of this pipeline writes (delta tables: "
                f"{known or 'none'}); a Delta table elsewhere is read with path: <folder>"
            )
        writer, format_, mode = writers[table]
        if format_ != "delta":
            raise UserError(
                f"{where}, which flow {writer!r} writes as {format_}: a table read as a "
                f"stream must be Delta; set flows.{writer}.sink.format: delta"
            )
        skips = str(
            {k.lower(): v for k, v in source.options.items()}.get("skipchangecommits", "")
        ).lower()
        if mode != "append" and not source.read_change_feed and skips != "true":
            how = {
                "update": "merges rows into it (update mode)",
                "cdc": "merges its changes into it (cdc)",
            }.get(mode, f"rewrites it every batch ({mode} mode)")
            raise UserError(
                f"{where}, which flow {writer!r} {how}: read its changes with "
                f"sources.{source_name}.read_change_feed: true (or pass over changed rows "
                f"with sources.{source_name}.options.skipChangeCommits: true)"
            )


def change_feed_tables(spec: PipelineSpec) -> set[str]:
    """The pipeline's tables some enabled flow reads the change data feed of."""
    return {str(source.table) for _, _, source in _table_reads(spec) if source.read_change_feed}


def _table_reads(spec: PipelineSpec) -> list[tuple[str, str, SourceSpec]]:
    """(flow, source, its spec) for each Delta table an enabled flow reads by name."""
    found = []
    for name, flow in spec.flows.items():
        if not flow.enabled:
            continue
        for source_name in dict.fromkeys([flow.source, *flow.streams.values()]):
            source = spec.sources[source_name]
            if source.format == "delta" and source.table is not None:
                found.append((name, source_name, source))
    return found
