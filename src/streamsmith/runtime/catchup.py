"""Whether a catch-up run has anything to read, decided from files and offsets alone.

A catch-up (``available-now``) whose sources hold nothing beyond what every query last
committed would start Spark, plan each query, find no data and stop: seconds of work for
nothing. Spark's checkpoint says what each query has read (the file source's log lists
the files; the offset log holds Kafka's end offsets), so comparing it with the input
folder's files or the broker's end offsets answers the question before a JVM starts.

The answer must be exact, so anything uncertain means "run": a planned batch not yet
committed, a source kind other than files and Kafka, a stream-stream join, a glob this
module cannot match exactly as Hadoop does, a Kafka end offset that no fetch response
confirmed (some brokers' ListOffsets answer falls short), a broker that does not answer.
A restart with nothing new runs no batch (Spark runs a no-data batch only after a batch
of this process moved the watermark), so skipping it changes no output.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import replace
from fnmatch import fnmatchcase
from pathlib import Path

from streamsmith.io.kafka.client import BrokerMetadata, KafkaSourceError
from streamsmith.io.kafka.offsets import TopicPartition
from streamsmith.io.kafka.source import KafkaOptionError, parse_options
from streamsmith.monitor.eventlog import EventLog
from streamsmith.monitor.lag import processed_files
from streamsmith.runtime.late import late_possible
from streamsmith.runtime.plan import FlowPlan, Plan
from streamsmith.runtime.source_logs import kafka_offsets

log = logging.getLogger(__name__)

# "off": every catch-up starts its queries and lets Spark find out (the way to compare).
CHECK_ENV = "STREAMSMITH_NOTHING_NEW_CHECK"
_BROKER_TIMEOUT_S = 10.0


def nothing_new(plan: Plan) -> str | None:
    """Why no query of ``plan`` has anything to read (a sentence for the event log), or
    None when one has, or when that cannot be told for certain without Spark."""
    if os.environ.get(CHECK_ENV) == "off":
        return None
    if not _told_without_spark(plan):
        return None
    files: set[str] = set()
    partitions: set[TopicPartition] = set()
    for flow in map(_without_idle_late, plan.flows):
        batches = [committed_batch(output.checkpoint) for output in flow.outputs]
        if flow.streams or any(batch is None for batch in batches):
            return None
        if flow.source.is_file_source and (listed := _files_all_read(flow)) is not None:
            files |= listed
        elif flow.source.format == "kafka" and (
            ended := _offsets_all_read(flow, [b for b in batches if b is not None])
        ):
            partitions |= ended
        else:
            return None
    inputs = [_count(len(files), "file")] * bool(files)
    inputs += [_count(len(partitions), "Kafka partition")] * bool(partitions)
    return (
        f"nothing new: the last committed batches of the {len(plan.outputs)} queries "
        f"read all of their input ({', '.join(inputs) or 'none yet'})"
    )


# A catch-up that reads no more than this (bytes on disk; a gzipped file counts ten times)
# starts its JVM with the client compiler only: over a small backlog the server compiler's
# work never pays off (benchmarks/small_runs.py, cdc_catchup.py), over a large one it does
# (real_volume.py).
SMALL_BACKLOG_BYTES = 32 << 20


def small_backlog(plan: Plan) -> int | None:
    """The bytes a catch-up of ``plan`` has left to read, when every flow reads files (so
    the listing and its queries' logs tell it before Spark starts) and they come to no
    more than :data:`SMALL_BACKLOG_BYTES`; None otherwise (an always-on run, a Kafka
    source, a view with its own query, a larger backlog)."""
    if not _told_without_spark(plan):
        return None
    unread: dict[str, int] = {}
    for flow in plan.flows:
        if flow.streams or not flow.source.is_file_source or flow.source_path is None:
            return None
        listing = input_files(flow.source_path, flow.source.glob)
        if listing is None:
            return None
        weight = 1 if flow.source.compression == "none" else 10
        read = processed_files(flow.outputs[0].checkpoint / "sources" / "0")
        for path in listing - read:
            try:
                unread[path] = os.path.getsize(path) * weight
            except FileNotFoundError:
                continue  # moved away since the listing (an archive): not read either
    total = sum(unread.values())
    return total if total <= SMALL_BACKLOG_BYTES else None


def _told_without_spark(plan: Plan) -> bool:
    """Whether what a run of ``plan`` reads can be told from its flows' sources: a
    catch-up of flows and no view whose own code reads input only Spark can tell about."""
    if not all(output.trigger.terminates for output in plan.outputs):
        return False
    return bool(plan.flows) and all(view.query is None for view in plan.views)


def _without_idle_late(flow: FlowPlan) -> FlowPlan:
    """``flow`` without its late-events query while no batch of its main query has read
    input under a watermark: that query may never have started (``runtime.supervisor``),
    and has nothing to record until the main query reads more."""
    main = flow.outputs[0].checkpoint
    idle = [o for o in flow.outputs if o.role == "late" and not late_possible(main)]
    return replace(flow, outputs=tuple(o for o in flow.outputs if o not in idle)) if idle else flow


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}" + ("" if number == 1 else "s")


def committed_batch(checkpoint: Path) -> int | None:
    """The query's last batch, if it was committed (None: no checkpoint yet, or a batch
    planned but not committed, which the next start runs again)."""
    planned, committed = _log_ids(checkpoint / "offsets"), _log_ids(checkpoint / "commits")
    if not planned or max(planned) != max(committed, default=-1):
        return None
    return max(planned)


def _log_ids(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return [int(entry.name) for entry in folder.iterdir() if entry.name.isdigit()]


def _files_all_read(flow: FlowPlan) -> set[str] | None:
    """The input files, when every query's log lists all of them."""
    if flow.source_path is None:
        return None
    listing = input_files(flow.source_path, flow.source.glob)
    if listing is None:
        return None
    for output in flow.outputs:
        if not listing <= processed_files(output.checkpoint / "sources" / "0"):
            return None
    return listing


# Characters whose meaning differs between Hadoop's glob and fnmatch (classes, negation,
# alternatives, escapes): with any of them the glob is not applied and every file counts,
# which can only make a run happen, never skip one.
_UNSURE_GLOB = frozenset("[]{}\\^!")


def input_files(folder: Path, glob: str | None) -> set[str] | None:
    """Every file Spark's file source could read under ``folder`` (None: no folder).

    Spark skips names starting with ``.``, and with ``_`` unless they hold ``=`` (a
    partition folder) or start with ``_metadata``/``_common_metadata``, and files still
    being copied (``._COPYING_``), in every folder; it lists subfolders whatever
    ``recursive`` says (a table's partitions), so they are listed here too, and symbolic
    links are followed as Hadoop's local file system does.
    """
    if not folder.is_dir():
        return None
    pattern = None if glob is None or _UNSURE_GLOB & set(glob) else glob
    found: set[str] = set()
    for current, folders, names in os.walk(folder, followlinks=True):
        folders[:] = [name for name in folders if not _hidden(name)]
        for name in names:
            if not _hidden(name) and (pattern is None or fnmatchcase(name, pattern)):
                found.add(os.path.join(current, name))
    return found


def _hidden(name: str) -> bool:
    if name.startswith(("_metadata", "_common_metadata")):
        return False
    return (
        name.startswith(".")
        or (name.startswith("_") and "=" not in name)
        or name.endswith("._COPYING_")
    )


def _offsets_all_read(flow: FlowPlan, batches: Iterable[int]) -> set[TopicPartition] | None:
    """The source's partitions, when every query's last batch ended at the end offset of
    each partition the source now subscribes to, as the broker confirms."""
    pairs = zip(flow.outputs, batches, strict=True)
    ends = [kafka_offsets(output.checkpoint, batch) for output, batch in pairs]
    if any(end is None for end in ends):
        return None
    try:
        given = {key: str(value) for key, value in flow.source.options.items()}
        options = parse_options(given, streaming=False)
    except KafkaOptionError:
        return None  # an option only Spark's own connector knows: let it decide
    metadata = BrokerMetadata(options.kafka_conf, _BROKER_TIMEOUT_S)
    try:
        partitions = metadata.partitions(options.subscription)
        latest = metadata.confirmed_latest(partitions)
    except KafkaSourceError as exc:
        log.info("cannot tell whether %s has new records (%s): running", flow.name, exc)
        return None
    finally:
        metadata.close()
    if latest is None or not partitions or any(end != latest for end in ends):
        return None
    return set(partitions)


def record_nothing_new(plan: Plan, reason: str) -> None:
    """Record a catch-up that found nothing new as a run that started no query."""
    events = EventLog(plan.root, plan.spec.app)
    run = {"queries": [output.spark_name for output in plan.outputs]}
    events.write({"event": "run_started", **run, "message": f"{len(plan.outputs)} queries"})
    end = {"event": "run_finished", "nothing_new": True, "input_rows": 0, "output_rows": 0}
    end["message"] = reason
    events.write({**end, **run})
