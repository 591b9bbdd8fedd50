"""``generate``: synthetic input for an app, into files or Kafka, with its lookup tables.

The commands make the data (options and ``--to`` in :mod:`streamsmith.cli.targets`);
:mod:`streamsmith.generate.deliver` puts it where the app reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from streamsmith.cli.common import Root, err, say, spec_for
from streamsmith.cli.targets import (
    Chunks,
    Corrupt,
    Duplicates,
    Late,
    OutOfOrder,
    Seed,
    To,
    TooLate,
    kafka_topic,
    made,
    storage_root_of,
    target,
)
from streamsmith.errors import UserError
from streamsmith.object_store import local_only

if TYPE_CHECKING:
    from streamsmith.generate.events import EventData, Knobs

generate_cli = typer.Typer(
    rich_markup_mode="markdown", help="Write synthetic input for an app.", no_args_is_help=True
)


@generate_cli.command("cloudtrail")
def generate_cloudtrail_files(
    out_dir: Annotated[Path, typer.Option("--out", help="Directory to write AWSLogs/... into.")],
    files: Annotated[int, typer.Option("--files", help="Number of log files.")] = 10,
    records_per_file: Annotated[int, typer.Option("--records-per-file")] = 100,
    seed: Annotated[int, typer.Option("--seed")] = 1,
    corrupt_fraction: Annotated[
        float, typer.Option("--corrupt-fraction", help="0..1; share of corrupt files and records.")
    ] = 0.0,
    start: Annotated[
        str | None, typer.Option("--start", help="First event time, ISO 8601 (UTC if no zone).")
    ] = None,
    span: Annotated[
        str, typer.Option("--span", help="Event times spread over this duration, e.g. 3d.")
    ] = "3d",
) -> None:
    """Write gzipped CloudTrail log files as AWS delivers them."""
    from datetime import timedelta

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from streamsmith.config import parse_duration
    from streamsmith.generate.cloudtrail import generate_cloudtrail

    try:
        first = datetime.fromisoformat(start) if start else datetime(2026, 11, 20, tzinfo=UTC)
        if first.tzinfo is None:
            first = first.replace(tzinfo=UTC)
        spread = timedelta(seconds=parse_duration(span))
    except ValueError as exc:
        raise UserError(f"--start/--span: {exc}") from None
    with Progress(
        TextColumn("writing CloudTrail files"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task("files", total=files)
        report = made(partial(
            generate_cloudtrail, out_dir, files=files, records_per_file=records_per_file,
            seed=seed, corrupt_fraction=corrupt_fraction, start=first, span=spread,
            collect_ids=False, on_file=lambda _path: progress.advance(task),
        ))  # fmt: skip
    kinds = ", ".join(f"{kind}={count}" for kind, count in sorted(report.by_kind.items()))
    say(
        f"wrote {report.files_written} files to {out_dir}: {report.valid_records} valid records, "
        f"{report.quarantine_rows} corrupt items{' (' + kinds + ')' if kinds else ''}"
    )


@generate_cli.command("nest")
def generate_nest_snapshots(
    to: Annotated[
        str, typer.Option("--to", help="kafka://HOST:PORT/TOPIC")
    ] = "kafka://127.0.0.1:9092/nest-logs",
    devices: Annotated[int, typer.Option("--devices", help="Number of cameras.")] = 40,
    events: Annotated[int, typer.Option("--events", help="Number of snapshots.")] = 1000,
    seed: Annotated[int, typer.Option("--seed")] = 1,
    corrupt_fraction: Annotated[float, typer.Option("--corrupt-fraction")] = 0.0,
    partitions: Annotated[
        int, typer.Option("--partitions", help="Partitions if the topic is created.")
    ] = 3,
    root: Root = None,
) -> None:
    """Publish Nest snapshots to Kafka and write the device_locations lookup table."""
    from streamsmith.generate.deliver import deliver_nest, write_device_locations
    from streamsmith.generate.nest import nest_data

    topic = kafka_topic(to, partitions)
    storage = storage_root_of("nest", root)
    data = made(partial(
        nest_data, devices=devices, events=events, seed=seed, corrupt_fraction=corrupt_fraction
    ))  # fmt: skip
    sent = deliver_nest(data, topic)
    locations = write_device_locations(data, storage)
    say(
        f"sent {sent} snapshots to {topic.name} on {topic.servers} ({data.camera_records} "
        f"camera records, {data.corrupt_messages} corrupt); wrote {len(data.locations)} device "
        f"locations to {locations}"
    )


def emit_events(
    app: str, make: Callable[..., EventData], knobs: Knobs, to: str | None, root: str | None
) -> None:
    """Write generated event chunks to files or Kafka and print what each label holds."""
    from streamsmith.generate.deliver import deliver_events

    data = made(partial(make, knobs=knobs))
    where, shown = target(app, to, root)
    deliver_events(data, where, app)
    labels = ", ".join(f"{data.label_counts[label]} {label}" for label in sorted(data.label_counts))
    count = len(data.delivered)
    say(f"wrote {count} {app} events in {data.chunk_count} chunks to {shown}: {labels}")


@generate_cli.command("actions")
def generate_actions(
    to: To = None,
    phones: Annotated[int, typer.Option("--phones")] = 50,
    sessions: Annotated[int, typer.Option("--sessions", help="Open/close pairs.")] = 1000,
    chunks: Chunks = 10,
    seed: Seed = 1,
    out_of_order: OutOfOrder = 0.1,
    late: Late = 0.05,
    too_late: TooLate = 0.02,
    corrupt: Corrupt = 0.01,
    root: Root = None,
) -> None:
    """Phone open/close events (the seeds' first example) as JSON lines."""
    from streamsmith.generate.actions import actions_data
    from streamsmith.generate.events import Knobs

    knobs = Knobs(out_of_order, late, too_late, 0.0, corrupt)
    make = partial(actions_data, phones=phones, sessions=sessions, chunks=chunks, seed=seed)
    emit_events("actions", make, knobs, to, root)


@generate_cli.command("signals")
def generate_signals(
    to: To = None,
    devices: Annotated[int, typer.Option("--devices")] = 10,
    events: Annotated[int, typer.Option("--events")] = 2000,
    chunks: Chunks = 10,
    seed: Seed = 1,
    out_of_order: OutOfOrder = 0.1,
    late: Late = 0.05,
    too_late: TooLate = 0.02,
    corrupt: Corrupt = 0.01,
    root: Root = None,
) -> None:
    """IoT signal readings (eventTime, deviceId, signal) as JSON lines."""
    from streamsmith.generate.events import Knobs
    from streamsmith.generate.signals import signals_data

    knobs = Knobs(out_of_order, late, too_late, 0.0, corrupt)
    make = partial(signals_data, devices=devices, events=events, chunks=chunks, seed=seed)
    emit_events("signals", make, knobs, to, root)


@generate_cli.command("activity")
def generate_activity(
    to: To = None,
    users: Annotated[int, typer.Option("--users", help="1 to 9 (a..i).")] = 9,
    events: Annotated[int, typer.Option("--events")] = 2000,
    chunks: Chunks = 10,
    seed: Seed = 1,
    out_of_order: OutOfOrder = 0.1,
    late: Late = 0.05,
    too_late: TooLate = 0.02,
    duplicates: Duplicates = 0.1,
    corrupt: Corrupt = 0.01,
    root: Root = None,
) -> None:
    """User activity records (the heterogeneity dataset's shape) as JSON lines."""
    from streamsmith.generate.activity import activity_data
    from streamsmith.generate.events import Knobs

    knobs = Knobs(out_of_order, late, too_late, duplicates, corrupt)
    make = partial(activity_data, users=users, events=events, chunks=chunks, seed=seed)
    emit_events("activity", make, knobs, to, root)


@generate_cli.command("logs")
def generate_logs(
    to: To = None,
    hosts: Annotated[int, typer.Option("--hosts")] = 8,
    entries: Annotated[int, typer.Option("--entries")] = 5000,
    chunks: Chunks = 10,
    seed: Seed = 1,
    out_of_order: OutOfOrder = 0.1,
    late: Late = 0.05,
    too_late: TooLate = 0.01,
    duplicates: Duplicates = 0.05,
    corrupt: Corrupt = 0.02,
    root: Root = None,
) -> None:
    """Service log entries (JSON or log4j) in log-collector envelopes, as JSON lines."""
    from streamsmith.generate.events import Knobs
    from streamsmith.generate.logs import logs_data

    knobs = Knobs(out_of_order, late, too_late, duplicates, corrupt)
    make = partial(logs_data, hosts=hosts, entries=entries, chunks=chunks, seed=seed)
    emit_events("logs", make, knobs, to, root)


@generate_cli.command("secops")
def generate_secops(
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="Directory holding auth/, dhcp/ and flows/ (default: the app's input "
            "folder) or kafka://HOST:PORT/PREFIX (topics PREFIX-auth, -dhcp, -flows).",
        ),
    ] = None,
    devices: Annotated[int, typer.Option("--devices", help="At least 13.")] = 20,
    chunks: Chunks = 12,
    seed: Seed = 1,
    corrupt: Corrupt = 0.01,
    root: Root = None,
) -> None:
    """Security logs of a small network with injected incidents, and its asset inventory."""
    from streamsmith.generate.deliver import deliver_secops, write_assets
    from streamsmith.generate.secops import SOURCES, secops_data

    _, pipeline = spec_for("secops", root=root)
    local_only(pipeline.root, "generate secops")
    data = made(partial(
        secops_data, devices=devices, chunks=chunks, seed=seed, corrupt_fraction=corrupt
    ))  # fmt: skip
    if to is not None and to.startswith("kafka://"):
        prefix = kafka_topic(to)
        deliver_secops(data, prefix)
        where = f"topics {prefix.name}-{{{','.join(SOURCES)}}} on {prefix.servers}"
    else:
        folder = Path(to) if to else pipeline.root / "input" / "secops"
        deliver_secops(data, folder)
        where = str(folder)
    assets = write_assets(data, pipeline.root)
    counts = ", ".join(f"{data.events[s]} {s} (+{data.corrupt[s]} corrupt)" for s in SOURCES)
    incidents = ", ".join(f"{i.rule} {i.entity}" for i in data.incidents)
    say(f"wrote {counts} in {chunks} chunks to {where}; {len(data.assets)} assets to {assets}")
    say(f"injected incidents: {incidents}")


@generate_cli.command("ysb")
def generate_ysb(
    to: To = None,
    events: Annotated[int, typer.Option("--events", min=1)] = 100_000,
    rate: Annotated[
        float, typer.Option("--rate", help="Events per second of event time.", min=1)
    ] = 10_000,
    chunks: Chunks = 10,
    seed: Seed = 1,
    corrupt: Corrupt = 0.0,
    root: Root = None,
) -> None:
    """Yahoo Streaming Benchmark ad events as JSON lines, and the ad -> campaign table."""
    from streamsmith.generate.deliver import deliver_ysb, write_campaigns
    from streamsmith.generate.ysb import ysb_data

    data = made(partial(
        ysb_data, events, rate=rate, chunks=chunks, seed=seed, corrupt_fraction=corrupt
    ))  # fmt: skip
    where, shown = target("ysb", to, root)
    deliver_ysb(data, where)
    campaigns = write_campaigns(data, storage_root_of("ysb", root))
    say(f"wrote {data.events} ad events (+{data.corrupt} corrupt; {rate:g} per second of "
        f"event time, {data.first_time:%H:%M:%S} to {data.last_time:%H:%M:%S} UTC) in {chunks} "
        f"chunks to {shown}; {len(data.campaigns)} ads to {campaigns}")  # fmt: skip
