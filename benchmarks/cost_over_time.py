"""Cost as work grows: many micro-batches of an always-on run, and catch-up at 1x..10x data.

``many``: the ``ysb`` app (a windowed aggregation per campaign with its watermark, the
quarantine of malformed lines and the table of late events) runs as a user runs it,
``streamsmith run ysb --trigger interval=...`` in its own process. The script drops one
small JSON-lines file at a time into its input (``--events`` events, 1% of them
malformed, a few later than the watermark; event time moves on 2 s a file, so windows
close and the state stays bounded) and waits for the table query to commit it: one
micro-batch per file, as fast as the run takes them. Every ``--every`` batches it prints
the run's memory (the Python driver's and the JVM's resident set, and the heap in use,
from ``jstat``), the size and file count of the checkpoints (offsets, commits, sources,
state), of the table's Delta log (``_delta_log``) and of the event log, the
table's data files, the median micro-batch time over the last samples (from the event
log), the files left in the input folder (Spark lists them at every trigger: with
``--set sources.ads.archive=archive/ysb`` the read ones move out), then stops the run
(SIGTERM, graceful), times ``status``, ``checkpoint show`` and a ``query``, and times
a fresh ``streamsmith run`` from its start to the commit of its next batch on the same
checkpoint (the run measured is that one from then on). Between samples it notes the run's
memory once a minute in ``<root>/driver-memory.tsv`` (time, pid, batch, driver and JVM
resident MB): how one process's memory moves between its start and the next sample.

``catch-up``: ``streamsmith generate ysb`` at ``--base-events`` times each of
``--sizes``, then per size one ``streamsmith run ysb --trigger available-now`` and one
``streamsmith backfill ysb`` (the same flows as batch jobs) over that input: each one's
wall time, the seconds per million events once its fixed cost (the same command over
1,000 events: the JVM start and the query plans) is taken off ("-" when it took no
longer than that: too small a size to tell), and the peak resident memory of its
processes (Python and JVM, sampled every 0.2 s).

    .venv/bin/python benchmarks/cost_over_time.py many --batches 20000 --every 2000
    .venv/bin/python benchmarks/cost_over_time.py catch-up --base-events 1000000 --sizes 1,3,10
    .venv/bin/python benchmarks/cost_over_time.py codegen --batches 300 --sizes 100,1000

``codegen``: the ``many`` run from a new root at each size of Spark's cache of generated
classes (``spark.sql.codegen.cache.maxEntries``; Spark's default 100, streamsmith's 1000),
one after the other: over the second half of its batches, the classes compiled (Spark's
``CodeGenerator`` metrics, written by its CSV sink every 5 s), the CPU seconds the run's
processes used (driver, JVM and its children) per batch, and the median batch.

Extra ``--set key=value`` options go to ``run`` and ``checkpoint show`` (e.g. a retention
setting, for a before/after).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TextIO

from _common import process_cpu

from streamsmith.generate.ysb import ysb_campaigns, ysb_data

START = datetime(2026, 1, 1, tzinfo=UTC)
SPAN_S = 2.0  # event time covered by one file
TABLE_QUERY = "ysb.campaign_windows"
LATE_PER_FILE = 2  # events a minute older than the file's: behind the 10-second watermark
ARCHIVE = "archive/ysb"  # where a run with --set sources.ads.archive=archive/ysb moves them


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    many = modes.add_parser("many", help="many micro-batches of an always-on run")
    many.add_argument("--batches", type=int, default=20_000)
    many.add_argument("--every", type=int, default=2_000, help="batches between samples")
    many.add_argument(
        "--root", type=Path, default=None,
        help="keep the run here and go on from where a run there stopped (a long run over "
        "several sittings); a temporary folder, deleted at the end, when not given",
    )  # fmt: skip
    catch_up = modes.add_parser("catch-up", help="one catch-up run at several data sizes")
    catch_up.add_argument("--base-events", type=int, default=1_000_000)
    catch_up.add_argument("--sizes", default="1,3,10", help="multiples of --base-events")
    codegen = modes.add_parser("codegen", help="a run at each size of the code cache")
    codegen.add_argument("--batches", type=int, default=300)
    codegen.add_argument("--sizes", default="100,1000", help="spark.sql.codegen.cache.maxEntries")
    for mode in (many, codegen):
        mode.add_argument("--events", type=int, default=200, help="events per micro-batch")
        mode.add_argument("--trigger", default="100ms", help="the run's trigger interval")
    for mode in (many, catch_up, codegen):
        mode.add_argument("--set", action="append", default=[], dest="sets")
    args = parser.parse_args()
    if args.mode == "many" and args.root is not None:
        run_many(args.root.resolve(), args)
        return
    with tempfile.TemporaryDirectory(prefix="streamsmith-cost-") as tmp:
        if args.mode == "many":
            run_many(Path(tmp), args)
        elif args.mode == "codegen":
            run_codegen(Path(tmp), args)
        else:
            run_catch_up(Path(tmp), args)


# -- processes ------------------------------------------------------------------------


def cli(root: Path, *args: str, sets: list[str] = ()) -> list[str]:  # type: ignore[assignment]
    """A ``streamsmith`` command line on storage ``root``."""
    extra = [part for item in sets for part in ("--set", item)]
    return [sys.executable, "-m", "streamsmith", *args, "--root", str(root), *extra]


def timed_cli(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def jvm_of(pid: int) -> int | None:
    """The JVM a ``streamsmith`` process started (its child running java)."""
    for child in Path(f"/proc/{pid}/task").glob("*/children"):
        for text in child.read_text().split():
            if "java" in Path(f"/proc/{text}/comm").read_text():
                return int(text)
    return None


def rss_mb(pid: int | None) -> float:
    if pid is None:
        return 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def heap_used_mb(jvm: int | None) -> float:
    """The JVM's heap in use (survivor, eden and old generation), from ``jstat -gc``."""
    if jvm is None:
        return float("nan")
    answer = subprocess.run(["jstat", "-gc", str(jvm)], check=True, capture_output=True, text=True)
    names, values = answer.stdout.split("\n")[:2]
    gc = dict(zip(names.split(), values.split(), strict=True))
    return sum(float(gc[k]) for k in ("S0U", "S1U", "EU", "OU")) / 1024


def start(command: list[str], root: Path) -> subprocess.Popen[bytes]:
    """``command`` started, its output appended to ``root/run.log`` (a pipe nobody reads
    would block a long run)."""
    with (root / "run.log").open("ab") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)


def stop(run: subprocess.Popen[bytes]) -> None:
    run.send_signal(signal.SIGTERM)
    if run.wait(timeout=180) not in (0, -signal.SIGTERM, 130, 143):
        raise SystemExit(f"the run ended with {run.returncode}")


# -- storage --------------------------------------------------------------------------


def tree(path: Path) -> tuple[float, int]:
    """MB and file count under ``path`` (Spark's ``.crc`` files counted too)."""
    sizes = []
    for file in path.rglob("*") if path.exists() else ():
        try:
            if file.is_file():
                sizes.append(file.stat().st_size)
        except FileNotFoundError:  # a file the running query renamed or deleted meanwhile
            continue
    return sum(sizes) / 2**20, len(sizes)


def table_checkpoint(root: Path) -> Path:
    """The checkpoint of the table query (not its quarantine's or late events')."""
    found = [p.parent for p in (root / "checkpoints").rglob("commits")]
    table = [p for p in found if "quarantine" not in str(p) and "late" not in str(p)]
    if len(table) != 1:
        raise SystemExit(f"cannot tell the table query's checkpoint among {found}")
    return table[0]


def last_commit(checkpoint: Path) -> int:
    ids = [int(p.name) for p in (checkpoint / "commits").glob("[0-9]*") if p.name.isdigit()]
    return max(ids, default=-1)


def batch_file(inbox: Path, number: int, events: int, campaigns: list[tuple[str, str]]) -> None:
    """File ``number``: ``events`` events over 2 s of event time from ``START``, 1%
    malformed, and a few a minute late."""
    at = START + timedelta(seconds=number * SPAN_S)
    data = ysb_data(events, rate=events / SPAN_S, chunks=1, seed=number,
                    corrupt_fraction=0.01, start=at, campaigns=campaigns)  # fmt: skip
    lines = data.chunks[0]
    if number >= 30:
        late = ysb_data(LATE_PER_FILE, rate=1000, chunks=1, seed=-number,
                        start=at - timedelta(minutes=1), campaigns=campaigns)  # fmt: skip
        lines = [*lines, *late.chunks[0]]
    staging = inbox / f".{number:07d}.tmp"
    staging.write_bytes(b"\n".join(lines) + b"\n")
    staging.replace(inbox / f"ysb-{number:07d}.json")


def wait_for_commit(checkpoint_of: Iterator[Path], past: int, run: subprocess.Popen[bytes]) -> int:
    """Wait until the table query commits a batch after ``past``; its id."""
    while True:
        if run.poll() is not None:
            raise SystemExit(f"the run ended with {run.returncode}")
        checkpoint = next(checkpoint_of)
        if checkpoint.exists() and (done := last_commit(checkpoint)) > past:
            return done
        time.sleep(0.02)


def checkpoints(root: Path) -> Iterator[Path]:
    """The table query's checkpoint, once it exists (the root's checkpoints folder till then)."""
    while True:
        try:
            found = table_checkpoint(root)
        except SystemExit:
            yield root / "checkpoints" / "-"
            continue
        while True:
            yield found


def batch_ms(root: Path, batches: int) -> float:
    """Median ``triggerExecution`` of the table query's last ``batches`` batches with input."""
    times = []
    for path in sorted((root / "_monitor" / "events").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            event = json.loads(line) if '"progress"' in line else {}
            if event.get("query") == TABLE_QUERY and event.get("input_rows"):
                times.append(event["batch_ms"])
    return statistics.median(times[-batches:]) if times else float("nan")


# -- many micro-batches ---------------------------------------------------------------


def input_files(root: Path) -> tuple[Path, int]:
    """The run's input folder and the files dropped so far (by an earlier sitting,
    archived by ``sources.ads.archive`` or not yet); a new root gets its campaigns."""
    inbox = root / "input" / "ysb"
    number = sum(len(list(folder.glob("ysb-*.json"))) for folder in (inbox, root / ARCHIVE))
    if not number:
        subprocess.run(cli(root, "generate", "ysb", "--events", "1", "--to", str(root / "seed")),
                       check=True, capture_output=True)  # the campaigns table  # fmt: skip
        inbox.mkdir(parents=True)
    return inbox, number


def run_many(root: Path, args: argparse.Namespace) -> None:
    inbox, number = input_files(root)
    campaigns = ysb_campaigns()
    start_run = cli(root, "run", "ysb", "--trigger", f"interval={args.trigger}", sets=args.sets)
    run = start(start_run, root)
    committed = last_commit(table_checkpoint(root)) if number else -1
    next_sample = (committed + 1) // args.every * args.every + args.every
    found = checkpoints(root)
    header = (f"{'batch':>6} {'py MB':>6} {'JVM MB':>7} {'heap':>5} {'ckpt MB':>8} "
              f"{'files':>6} {'offsets':>7} {'commits':>7} {'state':>6} {'srclog KB':>9} "
              f"{'deltalog KB':>11} {'files':>5} {'events MB':>9} {'files':>5} {'table':>6} "
              f"{'batch ms':>8} {'restart s':>9} {'status':>6} {'ckpt show':>9} "
              f"{'query':>6} {'inbox':>6} {'load':>5}")  # fmt: skip
    print(f"ysb, {args.events} events a batch, trigger {args.trigger}, sets {args.sets}")
    print(header, flush=True)
    memory_log = (root / MEMORY_LOG).open("a", encoding="utf-8")
    noted = time.monotonic()
    try:
        while committed + 1 < args.batches:
            batch_file(inbox, number, args.events, campaigns)
            number += 1
            committed = wait_for_commit(found, committed, run)
            if time.monotonic() - noted >= MEMORY_EVERY_S:
                noted = time.monotonic()
                note_memory(memory_log, run.pid, committed)
            if committed + 1 >= next_sample:
                next_sample += args.every
                run = sample(root, run, start_run, committed, args, inbox, number, campaigns)
                number += 1
                committed = last_commit(table_checkpoint(root))
    finally:
        memory_log.close()
        if run.poll() is None:
            stop(run)


# Between samples, the run's memory once a minute: the table's figures are each of a
# process that started at the sample before (each sample restarts the run).
MEMORY_LOG = "driver-memory.tsv"
MEMORY_EVERY_S = 60.0


def note_memory(log: TextIO, pid: int, committed: int) -> None:
    """One line: when, the run's pid, its last batch, the driver's and the JVM's RSS."""
    jvm = jvm_of(pid)
    log.write(f"{datetime.now(UTC):%H:%M:%S}\t{pid}\t{committed}\t{rss_mb(pid):.0f}\t"
              f"{rss_mb(jvm):.0f}\n")  # fmt: skip
    log.flush()


def sample(
    root: Path,
    run: subprocess.Popen[bytes],
    start_run: list[str],
    committed: int,
    args: argparse.Namespace,
    inbox: Path,
    number: int,
    campaigns: list[tuple[str, str]],
) -> subprocess.Popen[bytes]:
    """Print one line of figures; return the restarted run."""
    jvm = jvm_of(run.pid)
    memory = (rss_mb(run.pid), rss_mb(jvm), heap_used_mb(jvm))
    checkpoint = table_checkpoint(root)
    parts = [tree(checkpoint / part)[1] for part in ("offsets", "commits", "state")]
    sources_kb = tree(checkpoint / "sources")[0] * 1024
    all_checkpoints = tree(root / "checkpoints")
    table = root / "tables" / "campaign_windows"
    sink_log = tree(table / "_delta_log")
    events = tree(root / "_monitor" / "events")
    data_files = len(list(table.glob("*.parquet")))
    unread = len(list(inbox.glob("ysb-*.json")))  # what the source lists at each trigger
    median_ms = batch_ms(root, args.every // 2)
    load = os.getloadavg()[1]  # the machine's, over 5 minutes: other work slows batches
    stop(run)  # its last batches (the watermark's) may commit as it stops
    committed = last_commit(checkpoint)
    status = timed_cli(cli(root, "status", "ysb"))  # reads the log: no spec values
    show = timed_cli(cli(root, "checkpoint", "show", "ysb", sets=args.sets))
    query = timed_cli(cli(root, "query", "select count(*) from campaign_windows"))
    batch_file(inbox, number, args.events, campaigns)
    started = time.perf_counter()
    run = start(start_run, root)
    wait_for_commit(checkpoints(root), committed, run)
    restart = time.perf_counter() - started
    print(f"{committed + 1:>6} {memory[0]:>6.0f} {memory[1]:>7.0f} {memory[2]:>5.0f} "
          f"{all_checkpoints[0]:>8.1f} {all_checkpoints[1]:>6} {parts[0]:>7} {parts[1]:>7} "
          f"{parts[2]:>6} {sources_kb:>9.0f} {sink_log[0] * 1024:>11.0f} {sink_log[1]:>5} "
          f"{events[0]:>9.2f} {events[1]:>5} {data_files:>6} {median_ms:>8.0f} "
          f"{restart:>9.1f} {status:>6.2f} {show:>9.2f} {query:>6.2f} {unread:>6} {load:>5.1f}",
          flush=True)  # fmt: skip
    return run


# -- the cache of generated code -----------------------------------------------------

CODEGEN_CACHE = "spark.sql.codegen.cache.maxEntries"
METRICS_PERIOD_S = 5


def run_codegen(root: Path, args: argparse.Namespace) -> None:
    sizes = [int(size) for size in args.sizes.split(",")]
    print(f"ysb, {args.batches} batches of {args.events} events, trigger {args.trigger}, "
          f"sets {args.sets}; the second half measured")  # fmt: skip
    print(f"{'cache':>6} {'compiled':>9} {'per batch':>9} {'CPU s/batch':>11} {'batch ms':>8} "
          f"{'load':>5}")  # fmt: skip
    for size in sizes:
        arm = root / f"cache-{size}"
        metrics = arm / "metrics"
        metrics.mkdir(parents=True)
        sink = "spark.conf.spark.metrics.conf.*.sink.csv"
        sets = [*args.sets, f"spark.conf.{CODEGEN_CACHE}={size}",
                f"{sink}.class=org.apache.spark.metrics.sink.CsvSink",
                f"{sink}.directory={metrics}", f"{sink}.period={METRICS_PERIOD_S}"]  # fmt: skip
        inbox, number = input_files(arm)
        campaigns = ysb_campaigns()
        run = start(cli(arm, "run", "ysb", "--trigger", f"interval={args.trigger}", sets=sets), arm)
        found, committed = checkpoints(arm), -1
        half: tuple[float, int, float] | None = None
        while committed + 1 < args.batches:
            batch_file(inbox, number, args.events, campaigns)
            number += 1
            committed = wait_for_commit(found, committed, run)
            if half is None and committed + 1 >= args.batches // 2:
                half = (time.time(), committed, cpu_seconds(run.pid))
        end = (time.time(), committed, cpu_seconds(run.pid))
        load = os.getloadavg()[1]
        time.sleep(METRICS_PERIOD_S + 1)  # the sink's next report covers the last batch
        stop(run)
        assert half is not None
        batches = end[1] - half[1]
        compiled = compilations(metrics, end[0]) - compilations(metrics, half[0])
        print(f"{size:>6} {compiled:>9} {compiled / batches:>9.2f} "
              f"{(end[2] - half[2]) / batches:>11.2f} {batch_ms(arm, batches):>8.0f} "
              f"{load:>5.1f}", flush=True)  # fmt: skip


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of ``pid``, its JVM and the JVM's ended children (the
    short processes Hadoop starts on a local disk)."""
    return sum(process_cpu(process) for process in (pid, jvm_of(pid)) if process is not None)


def compilations(metrics: Path, at: float) -> int:
    """Classes Spark's driver had compiled by ``at`` (epoch seconds), from its CSV sink."""
    found = list(metrics.glob("*.CodeGenerator.compilationTime.csv"))
    if len(found) != 1:
        raise SystemExit(f"no single CodeGenerator.compilationTime in {metrics}: {found}")
    count = 0
    for line in found[0].read_text().splitlines()[1:]:
        moment, value = line.split(",")[:2]
        if float(moment) <= at:
            count = int(value)
    return count


# -- catch-up at several sizes --------------------------------------------------------


def run_catch_up(root: Path, args: argparse.Namespace) -> None:
    sizes = [float(size) for size in args.sizes.split(",")]
    fixed = catch_up_once(root / "fixed", 1_000, args.sets)
    print(f"ysb, fixed cost (1,000 events): catch-up (available-now) {fixed[0][0]:.1f} s, "
          f"backfill {fixed[1][0]:.1f} s")  # fmt: skip
    print(f"{'size':>5} {'events':>12} {'input MB':>9} {'':>2}"
          + "".join(f" {'wall s':>7} {'s per M':>8} {'peak MB':>8}" for _ in RUNS))  # fmt: skip
    print(f"{'':>31}" + "".join(f" {name:<25}" for name in RUNS))
    for size in sizes:
        events = int(args.base_events * size)
        measured = catch_up_once(root / f"x{size:g}", events, args.sets)
        megabytes = tree(root / f"x{size:g}" / "input")[0]
        cells = ""
        for (wall, peak), (base, _) in zip(measured, fixed, strict=True):
            per_million = f"{(wall - base) / (events / 1e6):.1f}" if wall > base else "-"
            cells += f" {wall:>7.1f} {per_million:>8} {peak:>8.0f}"
        print(f"{size:>4g}x {events:>12,} {megabytes:>9.0f} {'':>2}{cells}", flush=True)


# What ``catch-up`` times per size, on the same input: the app's streaming catch-up, then
# the same flows as batch jobs (``streamsmith backfill``, into ``<root>/backfill``).
RUNS = ("catch-up (available-now)", "backfill")


def catch_up_once(root: Path, events: int, sets: list[str]) -> list[tuple[float, float]]:
    """Wall seconds and peak resident MB (driver and JVM) of each of ``RUNS`` over
    ``events`` generated events."""
    chunks = str(max(10, events // 200_000))  # files of ~50 MB at most
    subprocess.run(cli(root, "generate", "ysb", "--events", str(events), "--chunks", chunks),
                   check=True, capture_output=True)  # fmt: skip
    measured = [
        timed_peak(cli(root, "run", "ysb", "--trigger", "available-now", sets=sets), root),
        timed_peak(cli(root, "backfill", "ysb", sets=sets), root),
    ]
    read = records_read(root)
    if read != [events, events]:  # the catch-up's, then the backfill's
        raise SystemExit(f"{events:,} events generated, but the runs read {read}")
    return measured


def records_read(root: Path) -> list[int]:
    """The records each finished run read, from the event log, in order."""
    finished = []
    for path in sorted((root / "_monitor" / "events").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if '"run_finished"' in line:
                event = json.loads(line)
                finished.append((event["time"], int(event["input_rows"])))
    return [rows for _, rows in sorted(finished)]


def timed_peak(command: list[str], root: Path) -> tuple[float, float]:
    """Wall seconds and peak resident MB (the process and its JVM, sampled every 0.2 s)."""
    started = time.perf_counter()
    run = start(command, root)
    peak = 0.0
    while run.poll() is None:
        try:
            peak = max(peak, rss_mb(run.pid) + rss_mb(jvm_of(run.pid)))
        except (FileNotFoundError, ProcessLookupError):  # it ended between the looks
            break
        time.sleep(0.2)
    wall = time.perf_counter() - started
    if run.wait() != 0:
        raise SystemExit(f"{command[3]} failed: {(root / 'run.log').read_text()[-2000:]}")
    return wall, peak


if __name__ == "__main__":
    os.environ.pop("STREAMSMITH_ROOT", None)
    main()
