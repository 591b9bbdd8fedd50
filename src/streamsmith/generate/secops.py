"""A small office network for the security platform, with incidents injected on purpose.

Devices of an asset inventory lease IPs from a DHCP server (assign, then a renewal every
half lease), their owners log in now and then (a few typos fail), and every device sends
network flows. On top of that normal traffic the generator injects, at fixed times:

- a **brute force** on one user from an outside address (many failures in two minutes)
  and a **password spray** from another outside address (one failure per user);
- a device that **goes offline** without releasing its lease;
- a **new device** (not in the inventory) that, once that lease has expired, gets the
  offline device's IP: the IP changes hands, which the DHCP attribution must follow;
- a device that **releases** its lease and leaves (not an incident: it said goodbye);
- an **anomalous host** sending unusual volumes to unusual ports.

:class:`SecopsData` holds the lines of each source per chunk (chunk *k* covers the
*k*-th slice of the time span), the inventory rows, the injected :class:`Incident`s and,
for every authentication event, the MAC of the device that held its source IP then
(the ground truth of the stream-stream join). Corrupt lines are extra lines (truncated,
wrong values, not JSON), so every real event still arrives. Same seed, same bytes.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from streamsmith.generate import check_corruption_and_time, produce_all
from streamsmith.generate.events import utc_text, write_line_chunks

SOURCES = ("auth", "dhcp", "flows")
LEASE = timedelta(minutes=20)
RENEW_EVERY = LEASE / 2
OUTSIDE_BRUTE_FORCE_IP = "203.0.113.7"
OUTSIDE_SPRAY_IP = "198.51.100.9"
NEW_DEVICE_MAC = "02:5e:00:00:00:01"
_TEAMS = ("finance", "engineering", "sales", "it")
_SERVERS = ("10.0.1.10", "10.0.1.11", "10.0.1.20", "10.0.1.30")
_PORTS = (443, 443, 443, 53, 22, 3306, 5432)


@dataclass(frozen=True)
class Incident:
    """What a detection rule should find: ``entity`` is ``kind:value`` as alerts name it."""

    rule: str
    entity: str
    start: datetime
    end: datetime


@dataclass
class SecopsData:
    """Generated lines per source and chunk, the inventory and the ground truth."""

    chunks: dict[str, list[list[bytes]]]
    assets: list[tuple[str, str, str, str, str]]
    incidents: list[Incident]
    holders: dict[str, str | None]  # auth event_id -> MAC holding its src_ip at that time
    leases: list[tuple[str, str, datetime, datetime, str]]  # ip, mac, start, end, ended_by
    events: Counter[str] = field(default_factory=Counter)  # valid events per source
    corrupt: Counter[str] = field(default_factory=Counter)  # corrupt lines per source

    def lines(self, source: str) -> list[bytes]:
        return [line for chunk in self.chunks[source] for line in chunk]


@dataclass
class _Lease:
    mac: str
    start: datetime
    end: datetime
    released: bool = False


class _Network:
    """The generator's running state: events per source, and who holds which IP when."""

    def __init__(self, start: datetime, span: timedelta, chunks: int) -> None:
        self.start, self.span, self.chunk_count = start, span, chunks
        self.records: dict[str, list[dict[str, Any]]] = {source: [] for source in SOURCES}
        self.leases: dict[str, list[_Lease]] = {}
        self.counter = 0

    def emit(self, source: str, moment: datetime, **fields: Any) -> dict[str, Any]:
        self.counter += 1
        record = {"event_id": f"{source}-{self.counter:07d}", "event_time": _ms(moment), **fields}
        self.records[source].append(record)
        return record

    def dhcp(self, moment: datetime, ip: str, mac: str, host: str, action: str) -> None:
        lease = 0 if action == "release" else int(LEASE.total_seconds())
        self.emit("dhcp", moment, ip=ip, mac=mac, hostname=host, action=action,
                  lease_seconds=lease)  # fmt: skip
        held = self.leases.setdefault(ip, [])
        if action == "release":
            held[-1].end, held[-1].released = moment, True
        elif held and held[-1].mac == mac and held[-1].end >= moment:
            held[-1].end = moment + LEASE
        else:
            held.append(_Lease(mac, moment, moment + LEASE))

    def holder(self, ip: str, moment: datetime) -> str | None:
        for lease in self.leases.get(ip, []):
            if lease.start <= moment < lease.end:
                return lease.mac
        return None


def secops_data(
    *,
    devices: int = 20,
    chunks: int = 12,
    seed: int = 1,
    corrupt_fraction: float = 0.01,
    start: datetime = datetime(2026, 11, 20, 8, tzinfo=UTC),
    span: timedelta = timedelta(hours=2),
    anomalous_host: bool = True,
) -> SecopsData:
    """A network of ``devices`` devices over ``span`` with the incidents injected (the
    span must be at least two hours: the incidents sit at fixed offsets).
    ``anomalous_host=False`` leaves out the anomaly: history to train the model on."""
    check_corruption_and_time(corrupt_fraction, start, span)
    if devices < 13:
        raise ValueError(f"devices must be at least 13 (incidents use devices 5, 7 and 12), "
                         f"got {devices}")  # fmt: skip
    if span < timedelta(hours=2) or chunks < 1:
        raise ValueError(f"span must be at least 2 hours and chunks at least 1, got {span} "
                         f"and {chunks}")  # fmt: skip
    rng = random.Random(seed)
    net = _Network(start, span, chunks)
    end = start + span
    macs = [
        f"00:16:3e:{i // 256:02x}:{i % 256:02x}:{rng.randrange(256):02x}" for i in range(devices)
    ]
    hosts = [f"ws-{i:02d}" for i in range(devices)]
    ips = [f"10.20.0.{10 + i}" for i in range(devices)]
    assets = [
        (macs[i], hosts[i], f"user-{i:02d}", _TEAMS[i % len(_TEAMS)],
         "high" if i % 5 == 0 else "normal")
        for i in range(devices)
    ]  # fmt: skip
    offline_at = start + timedelta(minutes=50)
    released_at = start + timedelta(minutes=70)
    incidents: list[Incident] = []
    for i in range(devices):
        online = start + timedelta(seconds=rng.uniform(0, 300))
        leaves = offline_at if i == 7 else released_at if i == 12 else end
        _device(net, rng, online, leaves, ips[i], macs[i], hosts[i], f"user-{i:02d}")
        if i == 12:
            net.dhcp(released_at, ips[i], macs[i], hosts[i], "release")
    # Device 7 went silent: its last DHCP event starts the offline clock.
    last_seen = max(r["event_time"] for r in net.records["dhcp"] if r["mac"] == macs[7])
    incidents.append(Incident("device_offline", f"mac:{macs[7]}", last_seen, last_seen))
    # A device nobody registered takes device 7's IP once that lease has run out.
    arrives = last_seen + LEASE + timedelta(minutes=2)
    _device(net, rng, arrives, end, ips[7], NEW_DEVICE_MAC, "android-5e01", "guest")
    incidents.append(Incident("new_device", f"mac:{NEW_DEVICE_MAC}", arrives, arrives))
    incidents += _brute_force(net, rng, start + timedelta(minutes=40), devices)
    if anomalous_host:
        incidents.append(_anomaly(net, rng, start + timedelta(minutes=100), ips[5]))
    holders = {r["event_id"]: net.holder(r["src_ip"], r["event_time"]) for r in net.records["auth"]}
    leases = [
        (ip, lease.mac, lease.start, lease.end, "released" if lease.released else "expired")
        for ip, held in net.leases.items()
        for lease in held
    ]
    data = SecopsData({}, assets, incidents, holders, sorted(leases))
    corrupt_rng = random.Random(seed ^ 0x5EC0)
    for source in SOURCES:
        records = sorted(net.records[source], key=lambda r: (r["event_time"], r["event_id"]))
        data.events[source] = len(records)
        data.chunks[source] = _chunked(records, start, span, chunks, corrupt_fraction,
                                       corrupt_rng, data.corrupt, source)  # fmt: skip
    return data


def _device(
    net: _Network,
    rng: random.Random,
    online: datetime,
    leaves: datetime,
    ip: str,
    mac: str,
    host: str,
    user: str,
) -> None:
    """A device's DHCP lease, its owner's logins and its flows between two times."""
    net.dhcp(online, ip, mac, host, "assign")
    moment = online + RENEW_EVERY + timedelta(seconds=rng.uniform(-30, 30))
    while moment < leaves:
        net.dhcp(moment, ip, mac, host, "renew")
        moment += RENEW_EVERY + timedelta(seconds=rng.uniform(-30, 30))
    moment = online + timedelta(seconds=rng.uniform(30, 600))
    while moment < leaves:
        result = "failure" if rng.random() < 0.05 else "success"
        net.emit("auth", moment, user=user, src_ip=ip, result=result,
                 method=rng.choice(("password", "sso", "ssh-key")))  # fmt: skip
        moment += timedelta(seconds=rng.uniform(300, 900))
    moment = online + timedelta(seconds=rng.uniform(5, 120))
    while moment < leaves:
        net.emit("flows", moment, src_ip=ip, dst_ip=rng.choice(_SERVERS),
                 dst_port=rng.choice(_PORTS), protocol="tcp",
                 bytes=int(rng.lognormvariate(9, 1)))  # fmt: skip
        moment += timedelta(seconds=rng.uniform(60, 180))


def _brute_force(net: _Network, rng: random.Random, at: datetime, devices: int) -> list[Incident]:
    """40 failures against one user in two minutes, and a spray: one failure per user."""
    victim = "user-03"
    burst = [_ms(at + timedelta(seconds=3 * n + rng.random())) for n in range(40)]
    for moment in burst:
        net.emit("auth", moment, user=victim, src_ip=OUTSIDE_BRUTE_FORCE_IP, result="failure",
                 method="password")  # fmt: skip
    spray_at = at + timedelta(minutes=15)
    sprayed = [_ms(spray_at + timedelta(seconds=12 * n + rng.random())) for n in range(devices)]
    for n, moment in enumerate(sprayed):
        net.emit("auth", moment, user=f"user-{n:02d}", src_ip=OUTSIDE_SPRAY_IP,
                 result="failure", method="password")  # fmt: skip
    return [
        Incident("brute_force", f"user:{victim}", burst[0], burst[-1]),
        Incident("brute_force", f"src_ip:{OUTSIDE_BRUTE_FORCE_IP}", burst[0], burst[-1]),
        Incident("brute_force", f"src_ip:{OUTSIDE_SPRAY_IP}", sprayed[0], sprayed[-1]),
    ]


def _anomaly(net: _Network, rng: random.Random, at: datetime, ip: str) -> Incident:
    """Ten minutes of large transfers to unusual ports from one workstation."""
    moments = [_ms(at + timedelta(seconds=10 * n + rng.random())) for n in range(60)]
    for moment in moments:
        outside = f"45.33.{rng.randrange(256)}.{rng.randrange(256)}"
        net.emit("flows", moment, src_ip=ip, dst_ip=outside,
                 dst_port=rng.randrange(10000, 60000), protocol="udp",
                 bytes=int(rng.uniform(5e6, 2e7)))  # fmt: skip
    return Incident("anomaly", f"src_ip:{ip}", moments[0], moments[-1])


def _ms(moment: datetime) -> datetime:
    """Millisecond precision, as the logs write times."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def _chunked(
    records: list[dict[str, Any]],
    start: datetime,
    span: timedelta,
    chunks: int,
    corrupt_fraction: float,
    rng: random.Random,
    corrupt: Counter[str],
    source: str,
) -> list[list[bytes]]:
    """Records as JSON lines in their time slice's chunk, corrupt extra lines mixed in."""
    out: list[list[bytes]] = [[] for _ in range(chunks)]
    for record in records:
        number = min(int((record["event_time"] - start) / span * chunks), chunks - 1)
        line = json.dumps({**record, "event_time": utc_text(record["event_time"])})
        out[number].append(line.encode())
        if rng.random() < corrupt_fraction:
            out[number].append(_garble(line, record, rng).encode())
            corrupt[source] += 1
    return out


def _garble(line: str, record: dict[str, Any], rng: random.Random) -> str:
    """A broken copy of a record: cut short, a required field missing, or a bad value."""
    choice = rng.randrange(3)
    if choice == 0:
        return line[: len(line) // 2]
    if choice == 1:
        broken = {k: v for k, v in record.items() if k != "event_time"}
        return json.dumps({**broken, "event_id": f"{record['event_id']}-x"})
    bad = {"auth": ("result", "maybe"), "dhcp": ("action", "steal"), "flows": ("bytes", -1)}
    key, value = bad[record["event_id"].split("-")[0]]
    return json.dumps({**record, "event_time": utc_text(record["event_time"]),
                       "event_id": f"{record['event_id']}-x", key: value})  # fmt: skip


def write_secops(
    data: SecopsData, folder: Path, numbers: range | None = None
) -> dict[str, list[Path]]:
    """One folder per source under ``folder``, one JSON-lines file per chunk (only the
    chunks ``numbers`` when given: the data arrives in parts)."""
    part = numbers if numbers is not None else range(len(data.chunks[SOURCES[0]]))
    return {
        source: write_line_chunks(
            [data.chunks[source][n] for n in part], folder / source, f"secops-{source}", part.start
        )
        for source in SOURCES
    }


def publish_secops(data: SecopsData, bootstrap: str, topic_prefix: str) -> dict[str, int]:
    """Each source to the topic ``<prefix>-<source>``, keyed by nothing (round robin)."""
    sent = {}
    for source in SOURCES:
        lines = data.lines(source)
        sent[source] = produce_all(
            bootstrap, f"{topic_prefix}-{source}", lines, [None] * len(lines)
        )
    return sent
