"""A small change-data-capture catch-up into an SCD type 1 Delta table: streamsmith's `cdc`
flow against the classic upsert written by hand, whole cold processes.

A CDC table is usually fed a little at a time, so what a catch-up of a few hundred change
events costs is mostly a cold process's: the JVM, the session, the Delta log and a MERGE
or two. This script generates such a feed (``--events`` sequence numbers over
``--keys`` customers: inserts, updates, deletes, about one in 20 delivered twice, each
arriving up to 30 sequence numbers late, a few 120 late) in ``--files`` JSON-lines
files, then runs, each as a cold process from empty outputs, alternating A B A B
(``--runs`` rounds):

- A: ``streamsmith run --trigger available-now`` in a copy of ``cdc_catchup/``, whose
  spec's flow has ``cdc: {keys, sequence_by, apply_as_deletes, except_columns}`` (type 1,
  tombstones kept for deletes) into a Delta table;
- B: ``python cdc_catchup/handwritten.py``: ``readStream.json``, ``availableNow`` and a
  ``foreachBatch`` keeping each key's latest event and MERGEing it into the table, on a
  ``local[*]`` session with streamsmith's jars (``jars.session_conf()``, ``DELTA_CONF``).

It prints wall seconds, CPU seconds, the process tree's and the JVM's peak memory (as
``real_volume.py`` measures them), the ratios A / B of the medians, and whether the last
round's tables, read with delta-rs, hold the same rows as each other and as the feed
gives (exit 1 if not).

    .venv/bin/python benchmarks/cdc_catchup.py --runs 2
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from deltalake import DeltaTable
from real_volume import Measured, measure, print_table

from streamsmith.spark.jars import session_conf
from streamsmith.spark.session import DELTA_CONF

HERE = Path(__file__).resolve().parent / "cdc_catchup"
COLUMNS = ("id", "name", "tier", "balance", "seq")  # both tables' (streamsmith adds __SEQUENCE)
TIERS = ("bronze", "silver", "gold")
Event = dict[str, Any]
Row = tuple[Any, ...]


def change_feed(events: int, keys: int, seed: int = 5) -> list[Event]:
    """Change events in arrival order, each with its own sequence (a duplicate repeats
    one)."""
    rng = random.Random(seed)
    alive: set[int] = set()
    feed: list[Event] = []
    for seq in range(1, events + 1):
        key = rng.randint(1, keys)
        if key in alive and rng.random() < 0.12:
            event: Event = {"id": key, "op": "delete", "seq": seq}
            alive.discard(key)
        else:
            op = "update" if key in alive else "insert"
            event = {"id": key, "name": f"customer {key}", "tier": rng.choice(TIERS),
                     "balance": rng.randrange(1000), "op": op, "seq": seq}  # fmt: skip
            alive.add(key)
        feed.append(event)
        if rng.random() < 0.05:
            feed.append(dict(event))
    arrival = [e["seq"] + rng.uniform(0, 30) + (120 if rng.random() < 0.03 else 0) for e in feed]
    return [feed[i] for i in sorted(range(len(feed)), key=arrival.__getitem__)]


def write_files(feed: list[Event], folder: Path, files: int) -> None:
    folder.mkdir(parents=True)
    for number in range(files):
        part = feed[len(feed) * number // files : len(feed) * (number + 1) // files]
        lines = "".join(json.dumps(event) + "\n" for event in part)
        (folder / f"changes-{number:03d}.jsonl").write_text(lines)


def describe(feed: list[Event]) -> str:
    newest: dict[int, int] = {}
    late = 0
    for event in feed:
        late += event["seq"] < newest.get(event["id"], 0)
        newest[event["id"]] = max(event["seq"], newest.get(event["id"], 0))
    deletes = sum(event["op"] == "delete" for event in feed)
    duplicates = len(feed) - len({event["seq"] for event in feed})
    return (
        f"{len(feed)} change events of {len(newest)} customers: {deletes} deletes, "
        f"{duplicates} duplicates, {late} arriving after a later change of their key"
    )


def scd1(feed: list[Event]) -> list[Row]:
    """The table the feed gives: each key's latest change, unless it is a delete."""
    latest: dict[int, Event] = {}
    for event in feed:
        if event["seq"] > latest.get(event["id"], {"seq": 0})["seq"]:
            latest[event["id"]] = event
    return sorted(tuple(e[c] for c in COLUMNS) for e in latest.values() if e["op"] != "delete")


def table_rows(path: Path) -> list[Row]:
    found = DeltaTable(str(path)).to_pyarrow_table(columns=list(COLUMNS)).to_pylist()
    return sorted(tuple(row[c] for c in COLUMNS) for row in found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="rounds of A then B")
    parser.add_argument("--events", type=int, default=190, help="sequence numbers in the feed")
    parser.add_argument("--keys", type=int, default=40, help="customers")
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--set", dest="sets", action="append", default=[],
                        help="also run streamsmith with this --set (e.g. spark.conf."
                        "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=4)")  # fmt: skip
    args = parser.parse_args()
    base = {
        k: v for k, v in os.environ.items() if k not in ("STREAMSMITH_ROOT", "SPARK_SUBMIT_OPTS")
    }
    conf = [f"--conf={key}={value}" for key, value in {**session_conf(), **DELTA_CONF}.items()]
    sets = [part for value in args.sets for part in ("--set", value)]
    with tempfile.TemporaryDirectory(prefix="cdc-catchup-") as folder:
        project = Path(folder) / "crm"
        project.mkdir()
        shutil.copy(HERE / "streamsmith.yml", project)
        feed = change_feed(args.events, args.keys)
        write_files(feed, project / "input" / "changes", args.files)
        print(f"{describe(feed)}, in {args.files} files", flush=True)
        handwritten = Path(folder) / "handwritten"
        run = [sys.executable, "-m", "streamsmith", "run", "--trigger", "available-now"]
        table = project / "data/tables/customers"
        sides = {  # a command, the folder it writes, its table
            "streamsmith": (run, project / "data", table),
            **({"streamsmith --set": ([*run, *sets], project / "data", table)} if sets else {}),
            "hand-written": ([sys.executable, str(HERE / "handwritten.py"),
                              str(project / "input" / "changes"), str(handwritten), *conf],
                             handwritten, handwritten / "customers"),
        }  # fmt: skip
        measured: dict[str, list[Measured]] = {name: [] for name in sides}
        os.chdir(project)  # streamsmith finds its spec here
        print(f"load average before: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
        for round_ in range(args.runs):
            for name, (command, out, _) in sides.items():
                shutil.rmtree(out, ignore_errors=True)
                result = measure(command, Path(folder) / f"{name}.log", base)
                measured[name].append(result)
                print(f"  round {round_ + 1} {name:<18} wall {result.wall:6.1f} s  cpu "
                      f"{result.cpu:6.1f} s  tree {result.peak_mb:6.0f} MB  jvm "
                      f"{result.jvm_mb:6.0f} MB", flush=True)  # fmt: skip
        print(f"load average after: {os.getloadavg()[0]:.1f}")
        print_table(measured, "hand-written")
        wanted = scd1(feed)
        found = {name: table_rows(path) for name, (_, _, path) in sides.items()}
    if all(rows == wanted for rows in found.values()):
        print(f"equal: both tables hold the {len(wanted)} rows the feed gives")
        return
    for name, rows in found.items():
        print(f"{name}: {len(rows)} rows; missing {sorted(set(wanted) - set(rows))}, "
              f"unexpected {sorted(set(rows) - set(wanted))}")  # fmt: skip
    sys.exit(1)


if __name__ == "__main__":
    main()
