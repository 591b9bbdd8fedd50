"""A plan as people and the dashboard see it: ``streamsmith dry-run``'s text, and the
pipeline's dependency graph (sources, flows, the tables they read of each other, the
materialized views) as edges."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from streamsmith.runtime.late import describe_rule
from streamsmith.runtime.plan import Plan


def describe_plan(plan: Plan) -> str:
    """A human-readable plan, as ``streamsmith dry-run`` prints it."""
    lines = [
        f"app {plan.app.name}: {plan.app.description}",
        f"storage root: {plan.root}",
        f"spark master: {plan.spec.spark.master}",
    ]
    for flow in plan.flows:
        lines.append(f"flow {flow.name}: {flow.definition.description}")
        lines.append(f"  source {flow.source_name}: {flow.input.describe()}")
        for stream in flow.streams:
            lines.append(
                f"  joins stream {stream.definition.name} from source {stream.source_name}"
            )
        rule = flow.definition.event_time
        if rule is not None:
            lines.append(f"  event time: {describe_rule(rule)}")
        if flow.schedule is not None:
            lines.append(f"  schedule {flow.schedule.name}: {flow.schedule.cron} (UTC)")
        for expectation in flow.expectations:
            lines.append(
                f"  expect {expectation.name}: {expectation.sql} (on failure: {expectation.action})"
            )
        for output in flow.outputs:
            partitions = ", ".join(output.partition_by) or "none"
            where = output.sink.describe()
            named = f"sink {output.name}: " if output.name is not None else ""
            lines.append(
                f"  {output.kind} query {output.query_name}: {named}{where} "
                f"[{output.output_mode}, partitioned by {partitions}, trigger {output.trigger}]"
            )
            lines.append(f"    checkpoint {output.checkpoint}")
            lines.append(f"    backfill   {output.backfill_path}")
        for task in flow.maintenance:
            when = [f"{op} {task.when(op)}" for op in task.operations()]
            lines.append(
                f"  maintenance of table {task.table}: {', '.join(when)}, "
                f"retain {task.retain_hours} hours"
            )
    for view in plan.views:
        after = ", ".join(sorted(view.flows))
        when = [f"after a run of {after}"] * bool(after) + [f"on {view.schedule} (UTC)"] * bool(
            view.schedule
        )
        lines.append(f"materialized view {view.name}: {view.description}".rstrip(": "))
        reads = ", ".join(view.reads) or "its own input"
        lines.append(f"  reads {reads}; full recompute into delta {view.path}")
        lines.append(f"  refreshed {' and '.join(when) or 'by each catch-up run'}")
    lines.extend(describe_graph(plan))
    lines.extend(f"warning: {warning}" for warning in plan.warnings)
    return "\n".join(lines)


@dataclass(frozen=True)
class GraphEdge:
    """One edge of a pipeline's dependency graph: ``source`` (a source, flow or view)
    feeds ``target`` (a flow or view), described by ``how``."""

    source: str
    source_kind: str  # source, flow or view
    target: str
    target_kind: str  # flow or view
    how: str  # e.g. "table orders, appended rows"; "" for a source read directly

    def as_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


def graph_edges(plan: Plan) -> list[GraphEdge]:
    """The pipeline's dependency graph: each flow's sources (a source of its own, or the
    flow writing the table it reads), then what each materialized view reads, in the
    order the flows start and the views refresh. The event log keeps it with each run,
    for the dashboard to draw."""
    edges = []
    for flow in plan.flows:
        for source_name, path in flow.inputs:
            writers = [
                other.name
                for other in plan.flows
                if any(o.kind == "table" and o.path == path for o in other.outputs)
            ]
            if not writers:
                edges.append(GraphEdge(source_name, "source", flow.name, "flow", ""))
                continue
            feed = plan.spec.sources[source_name].read_change_feed
            how = "its change data feed" if feed else "appended rows"
            assert path is not None
            edges.append(
                GraphEdge(writers[0], "flow", flow.name, "flow", f"table {path.name}, {how}")
            )
    writing = {o.table: f.name for f in plan.flows for o in f.outputs if o.role == "main"}
    views = {v.name for v in plan.views}
    for view in plan.views:
        for table in view.reads:
            kind = "view" if table in views else "table"
            writer = writing.get(table, table)
            writer_kind = "view" if table in views else "flow" if table in writing else "table"
            edges.append(GraphEdge(writer, writer_kind, view.name, "view", f"reads {kind} {table}"))
    return edges


def describe_graph(plan: Plan) -> list[str]:
    """The pipeline's dependency graph, one edge a line: what each flow reads (a source,
    or another flow's table), then what it writes, in the order the flows start; then
    what each materialized view reads. Every pipeline has one: it is how a user checks
    that the spec says what they meant."""
    then = ", then the views refresh" if plan.views else ""
    order = f"flows start in this order{then}"
    lines = [f"dependency graph (sources -> flows -> what they write; {order}):"]
    edges = graph_edges(plan)
    for flow in plan.flows:
        for edge in edges:
            if edge.target != flow.name or edge.target_kind != "flow":
                continue
            if edge.source_kind == "source":
                lines.append(f"  source {edge.source} -> {edge.target}")
            else:
                lines.append(f"  {edge.source} -> {edge.target} ({edge.how})")
        written = ", ".join(f"{output.kind} {output.table}" for output in flow.outputs)
        lines.append(f"  {flow.name} -> {written}")
    for edge in edges:
        if edge.target_kind == "view":
            lines.append(f"  {edge.source} -> {edge.target} (materialized view, {edge.how})")
    return lines
