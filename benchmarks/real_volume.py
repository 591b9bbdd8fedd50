"""A user's pipeline on real volumes against the same job written by hand, whole processes.

Generates flight-like JSON lines (``--records``, default 3,000,000 in ``--files`` 20
files, about 330 MB; one line in 10,000 malformed, of eight kinds; a few hundred records
failing an expectation) under ``--workdir`` (a temporary folder unless given; the input
is kept there and reused by a later run with the same size). Then runs, each as a cold
process, alternating A B A B (``--runs`` pairs):

- A: ``streamsmith run benchmarks/real_volume --trigger available-now``: the user's
  pipeline (``real_volume/streamsmith.yml``): a 1-day windowed aggregate per origin
  with a 3-day lateness, a ``drop`` and a ``quarantine`` expectation (Python,
  ``delays.py``), and a SQL filter (``long_delays.sql``), into Delta tables, with every
  guarantee on (quarantine with raw lines and line numbers, late events, counts,
  expectations, the event log);
- B: ``python real_volume/handwritten.py``: the same tables in plain PySpark and Delta
  (two queries: the aggregate, and a ``foreachBatch`` writing the filter table and the
  quarantine with raw lines).

For each it prints wall seconds, CPU seconds and peak resident memory of the whole
process tree (sampled from ``/proc`` every 0.1 s: PySpark's JVM and Python workers are
children that ``time -v`` leaves out; CPU from the rusage of every process reaped, the
script being their subreaper) and the JVM's peak RSS, then the ratios A / B, then checks
the last pair's tables are equal (the aggregate's rows, the filter's rows, the
quarantine's raw lines, and the quarantine against what was generated) and exits 1 if
not.

``--guarantees`` instead runs the pipeline with each guarantee switched off in turn
(``GUARANTEES``), alternating with everything on, and prints what each costs.

    .venv/bin/python benchmarks/real_volume.py --records 300000 --runs 2
    .venv/bin/python benchmarks/real_volume.py --records 300000 --guarantees
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn

import yaml
from deltalake import DeltaTable

HERE = Path(__file__).resolve().parent
PROJECT = HERE / "real_volume"
ORIGINS = 100
START = datetime(2024, 1, 1, tzinfo=UTC)
DAYS = 365
MALFORMED_EVERY = 10_000  # one line in this many is malformed
NOT_FLOWN_EVERY = 15_000  # distance 0: the `flown` expectation drops it
SAME_ROUTE_EVERY = 30_000  # origin = dest: the `real_route` expectation quarantines it


# -- the input ------------------------------------------------------------------------


def malformed(rng: random.Random, good: str) -> str:
    """One of eight kinds of broken line, made from a good one."""
    kind = rng.randrange(8)
    if kind == 0:
        return good[: rng.randrange(5, len(good) - 5)]  # cut short
    if kind == 1:
        return "#### export interrupted at " + good[10:30]  # not JSON
    if kind == 2:
        return good.replace('"dep_delay":', '"dep_delay":"n/a","x":', 1)  # not an int
    if kind == 3:
        return good.replace('"date":"2024-', '"date":"2024/13/45 ', 1)  # not a timestamp
    if kind == 4:
        return good.replace('"flight":', '"flight_no":', 1)  # required field missing
    if kind == 5:
        return good.replace('"origin":', '"origin":null,"o":', 1)  # required field null
    if kind == 6:
        return good.replace('"date":', '"day":', 1)  # the event time missing
    return good.replace('"dest":"', '"dest":', 1)  # a bare word


def generate(folder: Path, records: int, files: int, seed: int = 7) -> dict[str, int]:
    """``records`` lines in ``files`` files under ``folder``, in event-time order across
    files (each file a stretch of the year); returns what a correct run must find."""
    rng = random.Random(seed)
    airports = [f"{chr(65 + i // 26 % 26)}{chr(65 + i % 26)}X" for i in range(ORIGINS)]
    folder.mkdir(parents=True, exist_ok=True)
    expected = Counter[str]()
    per_file = records // files
    minutes = DAYS * 24 * 60
    for number in range(files):
        lines = []
        count = per_file if number < files - 1 else records - per_file * (files - 1)
        low = minutes * number // files
        high = minutes * (number + 1) // files
        for _ in range(count):
            origin, dest = rng.sample(airports, 2)
            distance = rng.randrange(100, 3000)
            if rng.randrange(NOT_FLOWN_EVERY) == 0:
                distance = 0
            if rng.randrange(SAME_ROUTE_EVERY) == 0:
                dest = origin
            when = START + timedelta(minutes=rng.randrange(low, high))
            arrival = int(rng.expovariate(1 / 25)) - 10
            line = (
                f'{{"flight":"{origin[:2]}{rng.randrange(1, 9999)}","origin":"{origin}",'
                f'"dest":"{dest}","date":"{when:%Y-%m-%d %H:%M}",'
                f'"dep_delay":{arrival + rng.randrange(-5, 6)},"arr_delay":{arrival},'
                f'"distance":{distance}}}'
            )
            if rng.randrange(MALFORMED_EVERY) == 0:
                line = malformed(rng, line)
                expected["malformed"] += 1
            elif dest == origin:
                expected["same_route"] += 1
            lines.append(line)
        (folder / f"flights-{number:03d}.jsonl").write_text("\n".join(lines) + "\n")
    return dict(expected)


def input_folder(workdir: Path, records: int, files: int) -> tuple[Path, dict[str, int]]:
    """The input of this size under ``workdir``, generated unless a run left it there."""
    folder = workdir / f"input-{records}-{files}"
    facts = folder / "expected.json"
    if facts.exists():
        return folder / "flights", json.loads(facts.read_text())
    shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()
    expected = generate(folder / "flights", records, files)
    facts.write_text(json.dumps(expected))
    size = sum(f.stat().st_size for f in (folder / "flights").iterdir()) / 1e6
    print(f"generated {records:,} lines ({size:.0f} MB, {files} files) in "
          f"{time.perf_counter() - started:.1f} s: {expected}", flush=True)  # fmt: skip
    return folder / "flights", expected


# -- a process tree, measured ---------------------------------------------------------

PR_SET_CHILD_SUBREAPER = 36


@dataclass
class Measured:
    wall: float
    cpu: float
    peak_mb: float  # the whole tree's resident memory at its largest
    jvm_mb: float  # the JVM's own peak RSS
    pythons: int  # the most Python processes at once (the driver, Spark's Python workers)


@dataclass
class _Sampler:
    root: int
    peak_kb: int = 0
    jvm_kb: int = 0
    pythons: int = 0
    done: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.done.wait(0.1):
            self.sample()

    def sample(self) -> None:
        parents: dict[int, int] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    parents[int(entry.name)] = int(
                        (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
                    )
                except (OSError, IndexError, ValueError):  # it ended meanwhile
                    continue
        me = os.getpid()
        tree = [pid for pid in parents if _descends(pid, parents, me) and pid != me]
        total = pythons = 0
        seen = {pid: _rss_kb(pid) for pid in tree}
        for pid, (rss, name) in seen.items():
            if _exe(pid).endswith("/java") and _exe(parents[pid]).endswith("/java"):
                continue  # the JVM starting a process (Hadoop's chmod): its pages, not new ones
            total += rss
            pythons += name.startswith("python")
            if name == "java":
                self.jvm_kb = max(self.jvm_kb, rss)
        self.peak_kb = max(self.peak_kb, total)
        self.pythons = max(self.pythons, pythons)


def _descends(pid: int, parents: dict[int, int], ancestor: int) -> bool:
    while pid > 1:
        pid = parents.get(pid, 0)
        if pid == ancestor:
            return True
    return False


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def _rss_kb(pid: int) -> tuple[int, str]:
    """A process's resident KB and its name."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0, ""
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return int(fields.get("VmRSS", "0 kB").split()[0]), fields.get("Name", "").strip()


def measure(command: Sequence[str], log: Path, env: dict[str, str] | None = None) -> Measured:
    """Run ``command`` to its end and every process it started to theirs (this process
    adopts its orphans, so a JVM outliving its Python driver is still counted)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    started = time.perf_counter()
    with log.open("ab") as out:
        pid = os.posix_spawn(command[0], list(command), env or dict(os.environ),
                             file_actions=[(os.POSIX_SPAWN_DUP2, out.fileno(), 1),
                                           (os.POSIX_SPAWN_DUP2, out.fileno(), 2)])  # fmt: skip
    sampler = _Sampler(pid)
    thread = threading.Thread(target=sampler.run, daemon=True)
    thread.start()
    cpu, status = 0.0, None
    while True:
        try:
            reaped, code, usage = os.wait4(-1, 0)
        except ChildProcessError:
            break
        cpu += usage.ru_utime + usage.ru_stime
        if reaped == pid:
            status = os.waitstatus_to_exitcode(code)
    wall = time.perf_counter() - started
    sampler.done.set()
    thread.join()
    if status != 0:
        raise SystemExit(f"{' '.join(command)} ended with {status}; see {log}")
    return Measured(wall, cpu, sampler.peak_kb / 1024, sampler.jvm_kb / 1024, sampler.pythons)


# -- the two sides --------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    name: str
    command: Callable[[Path], list[str]]  # for an output folder
    tables: Callable[[Path], dict[str, Path]]  # aggregate, filter, quarantine


def streamsmith_side(
    inputs: Path,
    project: Path = PROJECT,
    name: str = "streamsmith",
    without: str = "",
    sets: Sequence[str] = (),
) -> Side:
    """``streamsmith run`` of ``project`` (with ``sets`` as ``--set`` options); with
    ``without``, through ``without.py``, with those guarantees off."""
    start = [str(PROJECT / "without.py"), without, "--"] if without else ["-m", "streamsmith"]
    extra = [part for value in sets for part in ("--set", value)]

    def command(out: Path) -> list[str]:
        return [sys.executable, *start, "run", str(project), "--trigger", "available-now",
                "--root", str(out), "--set", f"sources.flights.path={inputs}", *extra]  # fmt: skip

    def tables(out: Path) -> dict[str, Path]:
        names = {"aggregate": "daily_delays", "filter": "long_delays"}
        found = {key: out / "tables" / table for key, table in names.items()}
        return {**found, "quarantine": out / "tables" / "daily_delays_quarantine"}

    return Side(name, command, tables)


def handwritten_side(inputs: Path) -> Side:
    from streamsmith.spark.jars import group_jars

    delta = [str(jar) for jar in group_jars("spark") if jar.name.startswith("delta-")]

    def command(out: Path) -> list[str]:
        return [sys.executable, str(PROJECT / "handwritten.py"), str(inputs), str(out),
                "--jars", ",".join(delta)]  # fmt: skip

    def tables(out: Path) -> dict[str, Path]:
        names = {"aggregate": "daily_delays", "filter": "long_delays", "quarantine": "quarantine"}
        return {key: out / table for key, table in names.items()}

    return Side("hand-written", command, tables)


def run_pairs(
    sides: Sequence[Side], workdir: Path, runs: int
) -> tuple[dict[str, list[Measured]], dict[str, Path]]:
    """Each side ``runs`` times, in turn, each from empty outputs; the last outputs."""
    measured: dict[str, list[Measured]] = {side.name: [] for side in sides}
    last: dict[str, Path] = {}
    for round_ in range(runs):
        for side in sides:
            out = workdir / "out" / side.name.replace(" ", "-")
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            result = measure(side.command(out), workdir / f"{out.name}.log")
            measured[side.name].append(result)
            last[side.name] = out
            print(f"  round {round_ + 1} {side.name:<28} wall {result.wall:6.1f} s  cpu "
                  f"{result.cpu:6.1f} s  tree {result.peak_mb:6.0f} MB  jvm "
                  f"{result.jvm_mb:6.0f} MB  pythons {result.pythons}", flush=True)  # fmt: skip
    return measured, last


def print_table(measured: dict[str, list[Measured]], base: str) -> None:
    kinds = (("wall s", "wall"), ("CPU s", "cpu"), ("tree MB", "peak_mb"), ("JVM MB", "jvm_mb"))
    print(f"{'':<30}" + "".join(f"{label:>18}" for label, _ in kinds))
    for name, runs in measured.items():
        cells = " / ".join
        print(f"{name:<30}" + "".join(
            f"{cells(f'{getattr(r, attr):.0f}' if attr.endswith('mb') else f'{getattr(r, attr):.1f}' for r in runs):>18}"  # noqa: E501
            for _, attr in kinds))  # fmt: skip
    for name, runs in measured.items():
        if name == base:
            continue
        ratios = []
        for _, attr in kinds:
            mine = statistics.median(getattr(r, attr) for r in runs)
            theirs = statistics.median(getattr(r, attr) for r in measured[base])
            ratios.append(f"{mine / theirs:.2f}x")
        print(f"{f'{name} / {base} (median)':<30}" + "".join(f"{r:>18}" for r in ratios))


# -- the outputs, compared ------------------------------------------------------------


def rows(table: Path) -> list[dict[str, Any]]:
    return DeltaTable(str(table)).to_pyarrow_table().to_pylist()  # type: ignore[no-any-return]


def outputs(tables: dict[str, Path]) -> dict[str, Counter[Any]]:
    """Each table as a multiset of comparable rows."""
    aggregate = Counter(
        (r["window"]["start"], r["origin"], r["flights"], r["total_arr_delay"], r["max_dep_delay"])
        for r in rows(tables["aggregate"])
    )
    filtered = Counter(
        (r["flight"], r["origin"], r["dest"], r["date"], r["arr_delay"])
        for r in rows(tables["filter"])
    )
    quarantine = Counter(r["raw"] for r in rows(tables["quarantine"]))
    return {"aggregate": aggregate, "filter": filtered, "quarantine raw lines": quarantine}


def check_equal(sides: Sequence[Side], last: dict[str, Path], expected: dict[str, int]) -> bool:
    found = {side.name: outputs(side.tables(last[side.name])) for side in sides}
    first, *others = sides
    equal = True
    for kind, rows_a in found[first.name].items():
        sizes = ", ".join(f"{s.name} {sum(found[s.name][kind].values()):,}" for s in sides)
        same = all(found[s.name][kind] == rows_a for s in others)
        equal &= same
        print(f"  {kind:<22} {'equal' if same else 'DIFFERENT'}: {sizes}")
    wanted = expected.get("malformed", 0) + expected.get("same_route", 0)
    got = sum(found[first.name]["quarantine raw lines"].values())
    if got != wanted:
        print(f"  quarantine holds {got:,} rows; the input has {wanted:,} to quarantine")
        equal = False
    return equal


# -- the cost of each guarantee -------------------------------------------------------


# Each guarantee off (those ``without.py`` switches, and the spec's expectations), then
# all of them: (label, what without.py switches off, whether the spec keeps `expect`).
GUARANTEES = (
    ("every guarantee on", "", True),
    ("quarantine off", "quarantine", True),
    ("late events off", "late", True),
    ("counts off", "counts", True),
    ("expectations off", "", False),
    ("event log off", "event_log", True),
    ("all of them off", "quarantine,late,counts,event_log", False),
)


def without_expectations(workdir: Path) -> Path:
    """A copy of the project whose spec has no ``expect``."""
    project = workdir / "project-without-expectations"
    shutil.rmtree(project, ignore_errors=True)
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__"))
    spec = yaml.safe_load((project / "streamsmith.yml").read_text())
    for flow in spec["flows"].values():
        flow.pop("expect", None)
    (project / "streamsmith.yml").write_text(yaml.safe_dump(spec))
    return project


def run_guarantees(inputs: Path, workdir: Path, runs: int) -> int:
    bare = without_expectations(workdir)
    sides = [
        streamsmith_side(inputs, PROJECT if expect else bare, label, switched)
        for label, switched, expect in GUARANTEES
    ]
    measured, _ = run_pairs([*sides, handwritten_side(inputs)], workdir, runs)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print_table(measured, GUARANTEES[0][0])
    print("per-record latency figures: Kafka sources only (a record's wait from its "
          "timestamp), not measured here")  # fmt: skip
    return 0


def add_pair_options(parser: argparse.ArgumentParser) -> None:
    """``--runs`` and ``--workdir``, as the A-against-B scripts take them."""
    parser.add_argument("--runs", type=int, default=2, help="rounds of A then B")
    parser.add_argument(
        "--workdir", type=Path, default=None, help="input and outputs (default: a temporary folder)"
    )


def exit_in_workdir(workdir: Path | None, prefix: str, run: Callable[[Path], int]) -> NoReturn:
    """Exit with what ``run`` returns, run in ``workdir`` (made if missing) or, without
    one, in a temporary folder named from ``prefix``."""
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            sys.exit(run(Path(tmp)))
    workdir.mkdir(parents=True, exist_ok=True)
    sys.exit(run(workdir.resolve()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=3_000_000)
    parser.add_argument("--files", type=int, default=20)
    add_pair_options(parser)
    parser.add_argument("--guarantees", action="store_true", help="each guarantee on and off")
    parser.add_argument(
        "--set", action="append", default=[], dest="sets",
        help="also run streamsmith with this --set (e.g. spark.conf.spark.driver.memory=1g)",
    )  # fmt: skip
    args = parser.parse_args()
    exit_in_workdir(args.workdir, "streamsmith-real-volume-", lambda workdir: run(args, workdir))


def run(args: argparse.Namespace, workdir: Path) -> int:
    inputs, expected = input_folder(workdir, args.records, args.files)
    print(f"load average before: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)", flush=True)
    if args.guarantees:
        return run_guarantees(inputs, workdir, args.runs)
    sides = [streamsmith_side(inputs), handwritten_side(inputs)]
    if args.sets:  # the same pipeline with other settings, beside the two
        sides.insert(1, streamsmith_side(inputs, name="streamsmith --set", sets=args.sets))
    measured, last = run_pairs(sides, workdir, args.runs)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print_table(measured, sides[-1].name)
    equal = check_equal(sides, last, expected)
    return 0 if equal else 1


if __name__ == "__main__":
    os.environ.pop("STREAMSMITH_ROOT", None)
    main()
