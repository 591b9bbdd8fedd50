"""``streamsmith schema show``: the stored versions of a source's record schema."""

from __future__ import annotations

from typing import Annotated

import typer

from streamsmith.cli.common import (
    AppOrSpec,
    Format,
    Root,
    Sets,
    SpecFiles,
    check_format,
    print_rows,
    say,
    spec_for,
)
from streamsmith.errors import UserError

schema_cli = typer.Typer(help="A source's record schema and its versions.", no_args_is_help=True)


@schema_cli.command("show")
def show(
    app: AppOrSpec = None,
    source: Annotated[str | None, typer.Argument(help="Only this source.")] = None,
    spec: SpecFiles = None,
    set_: Sets = None,
    root: Root = None,
    fmt: Format = "table",
) -> None:
    """Each source's schema: the versions stored for `schema: infer` (when and why each
    was added, from how many files), or the schema the spec declares. Loading a
    pipeline infers a `schema: infer` source's first version if none is stored."""
    from streamsmith.config import INFER
    from streamsmith.io.schema_store import schema_dir, versions

    check_format(fmt)
    _, pipeline = spec_for(app, spec, set_, root)
    names = [source] if source is not None else list(pipeline.sources)
    unknown = [name for name in names if name not in pipeline.sources]
    if unknown:
        raise UserError(
            f"app {pipeline.app} has no source {unknown[0]!r} "
            f"(its sources: {', '.join(pipeline.sources)})"
        )
    rows: list[list[object]] = []
    for name in names:
        declared = pipeline.sources[name].record_schema
        stored = versions(schema_dir(pipeline.root, pipeline.app, name))
        if declared == INFER:
            rows.extend(
                [name, v.version, v.ddl, v.added_at, f"{v.reason} ({len(v.sample)} file(s))"]
                for v in stored
            )
        else:
            rows.append([name, None, declared or "(parsed by the app's code)", None, "declared"])
    columns = ["source", "version", "schema", "added_at", "why"]
    if fmt != "table":
        print_rows(rows, columns, None, fmt)
        return
    for row in rows:  # whole schemas: never cut to a column
        source_name, version, ddl, added_at, why = row
        head = f"{source_name}: version {version}, {added_at}, {why}"
        say(f"{head if version is not None else source_name}\n  {ddl}")
