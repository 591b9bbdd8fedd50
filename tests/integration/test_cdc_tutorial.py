"""The tutorial "Change data capture" (docs/tutorials/change-data-capture.md), executed:
every command of its bash blocks in order, with the spec and change files its titled
blocks give; every table it shows is what its query prints, and the Delta tables hold
exactly those rows at each step."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from deltalake import DeltaTable
from tutorials import follow, free_port, run

from cdc_tutorial import (
    CURRENT,
    CUSTOMERS,
    FIRST,
    HISTORY,
    SECOND,
    TIER,
    TIERS,
    TUTORIAL,
    ordered,
    rows,
)

# A bash block ending in a query, then (after some prose) the table it prints.
SHOWN = re.compile(
    r"^```bash\n(?:(?!```).*\n)*?(streamsmith query .+)\n```\n"
    r"(?:(?!```).*\n)*?```text\n((?:.*\n)*?)```",
    re.M,
)


@pytest.fixture
def home() -> Iterator[Path]:
    """The tutorial's empty folder; its broker is stopped here should it fail half-way."""
    base = Path(tempfile.mkdtemp(prefix="streamsmith-cdc-tutorial-"))
    try:
        yield base
    finally:
        if (base / "data/broker").exists():
            run("streamsmith broker stop", base)
        shutil.rmtree(base)


@pytest.mark.deep  # a JVM per run, backfill and Spark-answered query: minutes
def test_the_cdc_tutorial_runs_as_written(home: Path) -> None:
    port = str(free_port())  # 9092 may be taken here: the reader would pick another too
    tutorial = TUTORIAL.read_text(encoding="utf-8").replace("9092", port)
    shown = SHOWN.findall(tutorial)
    assert len(shown) == 10, [command for command, _ in shown]
    tables, backfill = home / "data/tables", home / "data/backfill"
    runs, ran = 0, []
    for text, _, result in follow(tutorial, home):
        ran.append(text)
        if shown and text == shown[0][0]:  # the table the tutorial shows, as printed
            assert result.stdout.strip() == shown.pop(0)[1].strip(), result.stdout
        if text.startswith("streamsmith topic produce"):
            assert f"produced {3 if 'more' in text else 7} records" in result.stdout
        if text == "streamsmith run --trigger available-now":
            runs += 1
            assert rows(tables / "customer_history", HISTORY) == ordered([FIRST, SECOND][runs - 1])
            assert rows(tables / "customers", CURRENT) == CUSTOMERS[runs - 1]
            assert rows(tables / "customers_per_tier", TIER) == TIERS[runs - 1]
            assert "locally checkpointed" not in result.stderr, result.stderr
        if text == "streamsmith backfill":
            assert rows(backfill / "customer_history", HISTORY) == ordered(SECOND)
            assert rows(backfill / "customers", CURRENT) == CUSTOMERS[1]
            assert rows(backfill / "customers_per_tier", TIER) == TIERS[1]
        if text == "streamsmith table history customer_history":
            listed = run(f"{text} --format json", home).stdout.splitlines()
            versions = [(v["version"], v["operation"]) for v in map(json.loads, listed)]
            assert versions == [
                (3, "MERGE"), (2, "MERGE"), (1, "SET TBLPROPERTIES"), (0, "CREATE TABLE"),
            ]  # fmt: skip
            assert rows(tables / "customer_history", HISTORY, 2) == ordered(FIRST)
        if text.startswith("streamsmith table optimize"):
            table = text.split()[-1]
            compacted = (
                "0 files compacted into 0"
                if table == "customer_history"
                else "2 files compacted into 1"
            )
            assert result.stdout.strip() == f"{table}: {compacted}"
    assert not shown, shown
    assert runs == 2 and ran[-1] == "streamsmith broker stop"
    # Compaction kept every row, in both tables.
    assert rows(tables / "customer_history", HISTORY) == ordered(SECOND)
    assert rows(tables / "customers_per_tier", TIER) == TIERS[1]
    assert DeltaTable(str(tables / "customers_per_tier")).history(1)[0]["operation"] == "OPTIMIZE"
