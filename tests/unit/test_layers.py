"""The import structure of ``src/streamsmith``: no import cycles, and the layer contracts.

Both read the import graph that grimp (import-linter's graph library) builds from the
source, function-level imports included, without importing anything.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest
from importlinter.cli import lint_imports

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of the graph's modules, each sorted (Tarjan's
    algorithm, iterative: a deep import chain must not hit Python's recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def imported(module: str) -> Iterator[str]:
        return iter(sorted(graph.find_modules_directly_imported_by(module)))

    def visit(module: str) -> tuple[str, Iterator[str]]:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        return module, imported(module)

    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [visit(root)]
        while work:
            module, children = work[-1]
            for child in children:
                if child not in index:
                    work.append(visit(child))
                    break
                if child in on_stack:
                    low[module] = min(low[module], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[module])
                if low[module] == index[module]:
                    component: list[str] = []
                    while not component or component[-1] != module:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                    components.append(sorted(component))
    return components


def describe_cycle(graph: grimp.ImportGraph, component: list[str]) -> str:
    """The modules of a cycle and every import between them, with its line."""
    members = set(component)
    lines = [f"a cycle of {len(component)} modules: {', '.join(component)}"]
    for importer in component:
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
            for detail in graph.get_import_details(importer=importer, imported=imported):
                lines.append(
                    f"    {importer}:{detail['line_number']} imports {imported}"
                    f" ({detail['line_contents']})"
                )
    return "\n".join(lines)


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("streamsmith", cache_dir=None)


def test_strongly_connected_finds_cycles_and_leaves_the_rest() -> None:
    toy = grimp.ImportGraph()
    for importer, imported in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e")]:
        toy.add_import(importer=importer, imported=imported)
    toy.add_module("lone")
    found = sorted(strongly_connected(toy))
    assert found == [["a", "b", "c"], ["d"], ["e"], ["lone"]]


def test_no_import_cycles(graph: grimp.ImportGraph) -> None:
    assert len(graph.modules) > 50, "grimp did not find streamsmith's modules"
    cycles = [c for c in strongly_connected(graph) if len(c) > 1]
    report = "\n\n".join(describe_cycle(graph, component) for component in cycles)
    assert not cycles, f"modules that import each other (break each cycle):\n\n{report}"


def test_import_contracts_hold(capsys: pytest.CaptureFixture[str]) -> None:
    """The contracts of pyproject.toml's [tool.importlinter] (also `make lint`)."""
    # lint_imports configures logging with dictConfig, which disables every logger that
    # exists already (streamsmith's among them) for the rest of the process: keep them.
    existing = [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger) and not logger.disabled
    ]
    try:
        failed = lint_imports(config_filename=str(PYPROJECT), no_cache=True, no_logo=True)
    finally:
        for logger in existing:
            logger.disabled = False
    assert failed == 0, capsys.readouterr().out


def test_each_command_group_module_stays_short() -> None:
    """The command line is one thin module per command group (docs/development.md): one
    that grows past 300 lines holds logic that belongs below it, or a second group."""
    cli = Path(__file__).resolve().parents[2] / "src/streamsmith/cli"
    lines = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in cli.glob("*.py")}
    assert {name: n for name, n in lines.items() if n >= 300} == {}
