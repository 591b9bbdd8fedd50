"""Chaos: a pipeline of three always-on flows under a seeded schedule of faults, judged
against the feeder's ground truth.

The pipeline (a spec of its own, run by ``streamsmith run`` in its own process group):
JSON-lines files -> lake table (with quarantine); Kafka -> lake table (with quarantine);
Kafka -> PostgreSQL, per-minute counts per key in update mode. A feeder writes a file and
produces a batch of records every tick, malformed ones of many kinds among them. The
fault schedule (printed, replayable with ``--seed``) SIGKILLs the whole process group
(some while a batch is planned but not committed), stops it with SIGTERM, upgrades it
with a change ``check-upgrade`` approves, and takes the broker (Tansu on S3-compatible
storage, so its topics survive) and PostgreSQL away for ``--outage`` seconds each. At
the end the feeder stops, a catch-up run drains what is left, and the verdict compares
every table, quarantine and PostgreSQL row with what was sent: nothing lost, nothing
duplicated, every malformed record quarantined with its reason and raw payload.

    .venv/bin/python benchmarks/chaos.py --profile full --seed 7 --json chaos.json

``make test-chaos`` runs the full profile; ``make test`` runs the short one
(``tests/integration/test_chaos.py``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import yaml
from confluent_kafka import Producer

from streamsmith.io.kafka.broker import EmbeddedBroker, start_broker
from streamsmith.io.kafka.login import librdkafka_login
from streamsmith.io.postgres.server import (
    PostgresServer,
    create_database,
    start_postgres,
    stop_postgres,
)
from streamsmith.monitor.eventlog import read_events
from streamsmith.read.engine import answer

TOPIC = "events"
KEYS = [f"k{n}" for n in range(8)]
SCHEMA = "id string, key string, amount int, ts timestamp"


@dataclass(frozen=True)
class Profile:
    """How much chaos: faults of each kind, malformed records, and the pace."""

    kills: int
    broker_outages: int
    postgres_outages: int
    malformed: int
    sigterms: int = 1
    upgrades: int = 1
    records_per_tick: int = 40
    tick_s: float = 1.0


PROFILES = {
    "smoke": Profile(
        kills=1, broker_outages=0, postgres_outages=0, malformed=40, sigterms=0, upgrades=0
    ),
    "short": Profile(kills=5, broker_outages=1, postgres_outages=1, malformed=200),
    "full": Profile(kills=20, broker_outages=2, postgres_outages=2, malformed=1000),
}

CUT_GZIP = "gzip file cut short"
FLOWS = ("files_events", "kafka_events", "kafka_counts")
RECOVERY_S = 240.0  # the longest a flow may take to commit again after a fault
# Malformed records, by kind: (file line, Kafka value); None where a kind has no form
# on that path. Each reaches the quarantine with a reason.
MALFORMED: dict[str, tuple[bytes | None, bytes | None]] = {
    "truncated JSON": (b'{"id": "bad", "key": "k1", "amou', b'{"id": "bad", "key": "k1", "amou'),
    "wrong type": (
        b'{"id": "bad", "key": "k1", "amount": "lots", "ts": "2026-11-25T10:00:00Z"}',
        b'{"id": "bad", "key": "k1", "amount": "lots", "ts": "2026-11-25T10:00:00Z"}',
    ),
    "missing required field": (
        b'{"id": "bad", "amount": 1, "ts": "2026-11-25T10:00:00Z"}',
        b'{"id": "bad", "amount": 1, "ts": "2026-11-25T10:00:00Z"}',
    ),
    "unparseable timestamp": (
        b'{"id": "bad", "key": "k1", "amount": 1, "ts": "yesterday"}',
        b'{"id": "bad", "key": "k1", "amount": 1, "ts": "yesterday"}',
    ),
    "binary garbage": (b"\x00\x01\x02garbage\x7f", b"\x00\x01\x02garbage\x7f"),
    "empty value": (None, b""),
    "oversized value": (
        b'{"id": "bad", "key": "k1", "amount": ' + b"9" * 200_000 + b"}",
        b'{"id": "bad", "key": "k1", "amount": ' + b"9" * 200_000 + b"}",
    ),
    "JSON null": (b"null", b"null"),
    "array for an object": (b"[1, 2, 3]", b"[1, 2, 3]"),
    "a bare string": (b'"hello"', b'"hello"'),
    # A whole file: a gzip file cut short, whose whole lines are valid records and whose
    # lost rest is one quarantined record (Feeder.cut_gzip).
    CUT_GZIP: (None, None),
    "invalid UTF-8": (
        b'{"id": "bad\xff\xfe", "key": "k1", "amount": 1, "ts": "2026-11-25T10:00:00Z"}',
        b'{"id": "bad\xff\xfe", "key": "k1", "amount": 1, "ts": "2026-11-25T10:00:00Z"}',
    ),
}


@dataclass
class Truth:
    """What the feeder sent: valid ids per path, counts per (minute, key) of the Kafka
    path, and malformed records per path and kind."""

    file_ids: set[str] = field(default_factory=set)
    kafka_ids: set[str] = field(default_factory=set)
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    malformed: Counter[tuple[str, str]] = field(default_factory=Counter)

    @property
    def malformed_total(self) -> int:
        return sum(self.malformed.values())


@dataclass
class Fault:
    """One fault of the schedule: when (seconds into the run), what, and what happened."""

    at_s: float
    kind: str
    mid_batch: bool = False
    landed_mid_batch: bool | None = None
    started: float = 0.0  # when the fault was applied: epoch seconds
    ended: float = 0.0  # when the fault ended (the kill, the outage's end): epoch seconds
    interrupted: list[str] = field(default_factory=list)  # flows the next fault met first
    # Per flow: seconds from the kill (or the outage's end) to its first batch committed.
    recovered_s: dict[str, float | None] = field(default_factory=dict)


def schedule(profile: Profile, seed: int) -> list[Fault]:
    """The faults, spaced so each has time to recover before the next; a third of the
    kills wait for a batch in flight."""
    rng = random.Random(seed)
    kinds = (
        ["kill"] * profile.kills
        + ["broker"] * profile.broker_outages
        + ["postgres"] * profile.postgres_outages
        + ["sigterm"] * profile.sigterms
        + ["upgrade"] * profile.upgrades
    )
    rng.shuffle(kinds)
    mid = set(rng.sample(range(profile.kills), k=(profile.kills + 2) // 3))
    faults, at, kill = [], 20.0, 0
    for kind in kinds:
        at += rng.uniform(4.0, 10.0)
        faults.append(Fault(round(at, 1), kind, mid_batch=kind == "kill" and kill in mid))
        kill += kind == "kill"
    return faults


class Feeder(threading.Thread):
    """Writes a file and produces a batch of records every tick until stopped; keeps the
    ground truth. Malformed records are spread evenly until ``malformed`` were sent."""

    def __init__(self, home: Path, bootstrap: str, profile: Profile, seed: int) -> None:
        super().__init__(name="feeder", daemon=True)
        self.inbox = home / "data/input/files"
        self.inbox.mkdir(parents=True, exist_ok=True)
        self.producer = Producer(
            librdkafka_login(
                {
                    "bootstrap.servers": bootstrap,
                    "enable.idempotence": True,
                    "message.timeout.ms": 600_000,
                }
            )
        )
        self.profile, self.rng = profile, random.Random(seed)
        self.truth = Truth()
        self.stop_event = threading.Event()
        self.ticks = 0
        self.kinds = list(MALFORMED)

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.tick()
            self.stop_event.wait(self.profile.tick_s)

    def tick(self) -> None:
        number = self.ticks
        self.ticks += 1
        now = datetime.now(UTC)
        lines: list[bytes] = []
        for i in range(self.profile.records_per_tick):
            record = {"id": f"f{number}-{i}", "key": self.rng.choice(KEYS), "amount": i,
                      "ts": now.isoformat()}  # fmt: skip
            lines.append(json.dumps(record).encode())
            self.truth.file_ids.add(record["id"])
        for i in range(self.profile.records_per_tick):
            record = {"id": f"k{number}-{i}", "key": self.rng.choice(KEYS), "amount": i,
                      "ts": now.isoformat()}  # fmt: skip
            self.produce(json.dumps(record).encode())
            self.truth.kafka_ids.add(record["id"])
            minute = now.replace(second=0, microsecond=0).strftime("%Y-%m-%d %H:%M:%S")
            self.truth.counts[(minute, record["key"])] += 1
        for kind in self.bad_kinds():
            if kind == CUT_GZIP:
                self.cut_gzip(number)
                continue
            line, value = MALFORMED[kind]
            if line is not None:
                lines.append(line)
                self.truth.malformed[("files", kind)] += 1
            if value is not None:
                self.produce(value)
                self.truth.malformed[("kafka", kind)] += 1
        staging = self.inbox / f".part-{number:05d}.tmp"
        staging.write_bytes(b"\n".join(lines) + b"\n")
        staging.replace(self.inbox / f"part-{number:05d}.jsonl")
        self.producer.flush(60)

    def cut_gzip(self, number: int) -> None:
        """A gzipped file of valid records, cut short inside a line: its whole lines are
        valid records to land, the rest one malformed record (worked out here with zlib
        alone, not with the code under test)."""
        records = [json.dumps({"id": f"z{number}-{i}", "key": self.rng.choice(KEYS),
                               "amount": i, "ts": datetime.now(UTC).isoformat()}).encode()
                   for i in range(200)]  # fmt: skip
        packed = gzip.compress(b"\n".join(records) + b"\n", mtime=0)
        cut = packed[: self.rng.randrange(len(packed) // 4, len(packed) * 3 // 4)]
        whole = zlib.decompressobj(wbits=31).decompress(cut).rpartition(b"\n")[0]
        self.truth.file_ids.update(json.loads(line)["id"] for line in whole.splitlines())
        self.truth.malformed[("files", CUT_GZIP)] += 1
        staging = self.inbox / f".cut-{number:05d}.tmp"
        staging.write_bytes(cut)
        staging.replace(self.inbox / f"cut-{number:05d}.jsonl.gz")

    def bad_kinds(self) -> list[str]:
        """This tick's malformed kinds: a few each tick until the profile's count."""
        left = self.profile.malformed - self.truth.malformed_total
        if left <= 0:
            return []
        per_tick = max(1, min(len(self.kinds), left // 20 or 1))
        return [self.kinds[(self.ticks * per_tick + n) % len(self.kinds)] for n in range(per_tick)]

    def produce(self, value: bytes) -> None:
        while True:
            try:
                self.producer.produce(TOPIC, value=value)
                return
            except BufferError:
                self.producer.poll(0.5)


def spec_document(bootstrap: str, dsn: str, filtered: bool = False) -> dict[str, Any]:
    """The pipeline under test; ``filtered`` is the upgrade check-upgrade approves."""
    files_sql = "SELECT * FROM files" + (" WHERE amount >= 0" if filtered else "")
    return {
        "name": "chaos",
        "storage_root": "data",
        "trigger": "interval=1s",
        "side_interval": "1s",
        "spark": {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": 2}},
        "supervisor": {"max_retries": 1000, "backoff": "1s", "max_backoff": "4s"},
        "kafka": {"bootstrap_servers": bootstrap},
        "postgres": {"dsn": dsn},
        "sources": {
            "files": {"format": "jsonl", "path": "input/files", "schema": SCHEMA,
                      "compression": "gzip",
                      "required": ["id", "key", "amount", "ts"], "max_files_per_trigger": 5},
            "kafka": {"format": "kafka", "schema": SCHEMA,
                      "required": ["id", "key", "amount", "ts"],
                      "options": {"subscribe": TOPIC, "startingOffsets": "earliest",
                                  "pollTimeoutMs": 5000, "maxOffsetsPerTrigger": 2000}},
        },
        "flows": {
            "files_events": {"source": "files", "sql": files_sql,
                             "sink": {"table": "files_events"}},
            "kafka_events": {"source": "kafka", "sql": "SELECT * FROM kafka",
                             "sink": {"table": "kafka_events"}},
            "kafka_counts": {
                "source": "kafka",
                "sql": "SELECT window.start AS minute, key, count(*) AS n FROM kafka "
                       "GROUP BY window, key",
                "event_time": {"column": "ts", "lateness": "1 hour", "window": "1 minute"},
                "sink": {"format": "postgres", "table": "counts", "output_mode": "update",
                         "key": ["minute", "key"]},
            },
        },
    }  # fmt: skip


class Pipeline:
    """The pipeline's process: started, killed and stopped as the schedule says."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.process: subprocess.Popen[bytes] | None = None
        self.log = (home / "pipeline.log").open("ab")

    def start(self, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if k != "STREAMSMITH_ROOT"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "streamsmith", "run", str(self.home), *args],
            stdout=self.log, stderr=self.log, env=env, start_new_session=True,
        )  # fmt: skip

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=60)

    def terminate(self, timeout_s: float = 120) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return None


def in_flight(home: Path) -> bool:
    """Whether a main query has a batch planned but not committed."""
    for flow in FLOWS:
        checkpoint = home / "data/checkpoints/chaos" / flow
        offsets = _ids(checkpoint / "offsets")
        commits = _ids(checkpoint / "commits")
        if commits and offsets - commits:
            return True
    return False


def _ids(folder: Path) -> set[int]:
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.is_dir() else set()


def commits(home: Path) -> dict[str, int]:
    """Each main query's committed batches."""
    return {flow: len(_ids(home / "data/checkpoints/chaos" / flow / "commits")) for flow in FLOWS}


def run_chaos(profile: Profile, seed: int, home: Path, outage_s: float) -> dict[str, Any]:
    """Run the profile under ``home``; return the verdict (also printed)."""
    started = time.monotonic()
    faults = schedule(profile, seed)
    print(f"chaos seed {seed}: " + ", ".join(f"{f.kind}@{f.at_s:g}s" for f in faults))
    # The broker keeps its topics on disk in broker_home across its restarts.
    broker_home = home / "broker"
    broker = start_broker(broker_home)
    broker.create_topic(TOPIC, partitions=3)
    pg_home = home / "postgres"
    pg_home.parent.chmod(0o755)
    server = start_postgres(pg_home)
    dsn = create_database(server, "chaos")
    (home / "streamsmith.yml").write_text(yaml.safe_dump(spec_document(broker.bootstrap, dsn)))
    feeder = Feeder(home, broker.bootstrap, profile, seed)
    pipeline = Pipeline(home)
    try:
        feeder.start()
        pipeline.start()
        for fault in faults:
            _sleep_until(started, fault.at_s)
            broker = apply(fault, pipeline, broker, broker_home, pg_home, server, home,
                           outage_s)  # fmt: skip
        feeder.stop_event.set()
        feeder.join(timeout=120)
        time.sleep(5)
        pipeline.terminate()
        pipeline.start("--trigger", "available-now")  # drain what is left
        assert pipeline.process is not None
        drained = pipeline.process.wait(timeout=900)
        recovery_times(home, faults, time.time())
        verdict = judge(home, feeder.truth, dsn, faults, drained)
    finally:
        pipeline.kill()
        broker.stop()
        stop_postgres(pg_home, "immediate")
    verdict["wall_s"] = round(time.monotonic() - started, 1)
    verdict["seed"] = seed
    verdict["profile"] = asdict(profile)
    return verdict


def apply(
    fault: Fault,
    pipeline: Pipeline,
    broker: EmbeddedBroker,
    broker_home: Path,
    pg_home: Path,
    server: PostgresServer,
    home: Path,
    outage_s: float,
) -> EmbeddedBroker:
    """Apply one fault, then wait until the pipeline commits a batch again."""
    fault.started = time.time()
    if fault.kind == "kill":
        if fault.mid_batch:
            deadline = time.monotonic() + 60
            while not in_flight(home) and time.monotonic() < deadline:
                time.sleep(0.02)
        fault.landed_mid_batch = in_flight(home)
        pipeline.kill()
        pipeline.start()
    elif fault.kind == "sigterm":
        pipeline.terminate()
        pipeline.start()
    elif fault.kind == "upgrade":
        pipeline.terminate()
        document = yaml.safe_load((home / "streamsmith.yml").read_text())
        upgraded = spec_document(document["kafka"]["bootstrap_servers"],
                                 document["postgres"]["dsn"], filtered=True)  # fmt: skip
        (home / "streamsmith.yml").write_text(yaml.safe_dump(upgraded))
        command = [sys.executable, "-m", "streamsmith", "check-upgrade", str(home)]
        checked = subprocess.run(command, capture_output=True, text=True, check=False)
        if checked.returncode != 0:
            raise RuntimeError(
                f"check-upgrade refused the upgrade:\n{checked.stdout}{checked.stderr}"
            )
        pipeline.start()
    elif fault.kind == "broker":
        port = broker.port
        broker.stop()
        time.sleep(outage_s)
        broker = start_broker(broker_home, port)
    elif fault.kind == "postgres":
        stop_postgres(pg_home, "fast")
        time.sleep(outage_s)
        start_postgres(pg_home, server.port)
    # Paced by the first flow back; each flow's own recovery is read from its commit log
    # at the end (recovery_times), so a slow flow does not hold the schedule up.
    fault.ended = time.time()
    before, deadline = sum(commits(home).values()), time.monotonic() + RECOVERY_S
    while sum(commits(home).values()) <= before and time.monotonic() < deadline:
        time.sleep(0.2)
    return broker


def recovery_times(home: Path, faults: list[Fault], run_end: float) -> None:
    """Each fault's recovery per flow: from its end to the flow's first batch committed
    after it (the commit files' times). The faults are paced by the first flow back, so
    a slower flow may meet the next fault first: that recovery is ``interrupted`` (the
    next one counts it), not slow; a flow with no commit within RECOVERY_S of a fault it
    had time for did not recover."""
    for number, fault in enumerate(faults):
        window_end = faults[number + 1].started if number + 1 < len(faults) else run_end
        for flow in FLOWS:
            folder = home / "data/checkpoints/chaos" / flow / "commits"
            times = [p.stat().st_mtime for p in folder.iterdir() if p.name.isdigit()]
            first = min((t for t in times if t > fault.ended), default=None)
            if first is not None and first <= min(window_end, fault.ended + RECOVERY_S):
                fault.recovered_s[flow] = round(first - fault.ended, 1)
            elif window_end - fault.ended < RECOVERY_S:
                fault.interrupted.append(flow)
            else:
                fault.recovered_s[flow] = None


def _sleep_until(started: float, at_s: float) -> None:
    delay = started + at_s - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def judge(home: Path, truth: Truth, dsn: str, faults: list[Fault], drained: int) -> dict[str, Any]:
    """Every output against the ground truth."""
    root = home / "data"

    def rows(sql: str) -> list[tuple[Any, ...]]:
        found, _ = answer(root, sql, max_rows=10_000_000)
        return [tuple(row) for row in found]

    # The Kafka source's rejects are kept by the first of its flows (by name): counts.
    kafka_rejects = "counts_quarantine"
    paths = {}
    for path, table, rejects, sent in (
        ("files", "files_events", "files_events_quarantine", truth.file_ids),
        ("kafka", "kafka_events", kafka_rejects, truth.kafka_ids),
    ):
        ids = [row[0] for row in rows(f"SELECT id FROM {table}")]
        quarantined = rows(f"SELECT reason, raw FROM {rejects}")
        malformed = sum(n for (p, _), n in truth.malformed.items() if p == path)
        paths[path] = {
            "sent_valid": len(sent),
            "sent_malformed": malformed,
            "out": len(ids),
            "quarantined": len(quarantined),
            "lost": len(sent - set(ids)),
            "duplicated": len(ids) - len(set(ids)),
            "unexpected": len(set(ids) - sent),
            "quarantine_without_reason_or_raw": sum(
                1 for reason, raw in quarantined if not reason or raw is None
            ),
            "reconciles": len(sent) + malformed == len(ids) + len(quarantined),
            "sent_by_kind": {k: n for (p, k), n in sorted(truth.malformed.items()) if p == path},
            "quarantined_by_reason": dict(Counter(_reason_kind(r) for r, _ in quarantined)),
        }  # fmt: skip
    with psycopg.connect(dsn) as conn:
        stored = {
            (_minute(m), k): n for m, k, n in conn.execute("SELECT minute, key, n FROM counts")
        }
    wrong = {key: (stored.get(key), n) for key, n in truth.counts.items() if stored.get(key) != n}
    events = read_events(root, "chaos")
    verdict = {
        "paths": paths,
        "postgres_windows": len(truth.counts),
        "postgres_wrong_windows": len(wrong),
        "postgres_examples": [f"{k}: got {g}, sent {s}" for k, (g, s) in list(wrong.items())[:5]],
        "malformed_kinds": len({kind for _, kind in truth.malformed}),
        "faults": [asdict(f) for f in faults],
        "kills_mid_batch": sum(1 for f in faults if f.kind == "kill" and f.landed_mid_batch),
        "recovery_s": {flow: _spread([f.recovered_s.get(flow) for f in faults]) for flow in FLOWS},
        "interrupted": {flow: sum(flow in f.interrupted for f in faults) for flow in FLOWS},
        "unrecovered": [f"{f.kind}@{f.at_s:g}s: {flow}" for f in faults
                        for flow, took in f.recovered_s.items() if took is None],
        "restarts_in_event_log": sum(1 for e in events if e["event"] == "restart"),
        "failures_in_event_log": sum(1 for e in events if e["event"] == "failure"),
        "gave_up": [e.get("query") for e in events if e["event"] == "gave_up"],
        "drain_exit_code": drained,
    }  # fmt: skip
    verdict["ok"] = (
        drained == 0
        and not verdict["gave_up"]
        and not verdict["unrecovered"]
        and not wrong
        and all(p["lost"] == p["duplicated"] == p["unexpected"] == 0 and p["reconciles"]
                and p["quarantine_without_reason_or_raw"] == 0 for p in paths.values())
    )  # fmt: skip
    return verdict


def _reason_kind(reason: object) -> str:
    """A quarantine reason without its numbers (``after N bytes``), to count by kind."""
    return re.sub(r"\d+", "N", str(reason))[:60]


def _spread(seconds: list[float | None]) -> str:
    """The fastest and slowest recovery, as ``min-max``."""
    known = [s for s in seconds if s is not None]
    return f"{min(known):g}-{max(known):g}" if known else "none"


def _minute(value: datetime) -> str:
    """A window start as the feeder keys it: UTC, to the second."""
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value.strftime("%Y-%m-%d %H:%M:%S")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default="short")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--outage", type=float, default=30.0, help="seconds each outage lasts")
    parser.add_argument("--json", type=Path, help="also write the verdict here")
    parser.add_argument("--keep", type=Path, help="run under this folder and keep it")
    args = parser.parse_args()
    # A SIGTERM ends the run through its cleanup: the broker, the database and the
    # pipeline it started are stopped by their pids, not left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        verdict = run_chaos(PROFILES[args.profile], args.seed, args.keep, args.outage)
    else:  # removed when the verdict is ok; kept, and named, for a look when it is not
        home = Path(tempfile.mkdtemp(prefix="streamsmith-chaos-"))
        verdict = run_chaos(PROFILES[args.profile], args.seed, home, args.outage)
        if verdict["ok"]:
            shutil.rmtree(home, ignore_errors=True)
        else:
            print(f"the run's folder is kept for a look: {home}", file=sys.stderr)
    text = json.dumps(verdict, indent=2, default=str)
    print(text)
    if args.json:
        args.json.write_text(text)
    sys.exit(0 if verdict["ok"] else 1)


if __name__ == "__main__":
    main()
