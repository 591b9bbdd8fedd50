"""Let one query cut a Kafka source into the same micro-batches as another query.

A stateful flow's late-events companion must see each batch the flow's query saw, to
apply the watermark that query dropped events with (see ``streamsmith.runtime.late``).
In a catch-up run both plan the same batches, but an always-on run plans each query on
its own schedule, so the companion would rarely find its batch in the flow's offset log.
With ``followCheckpoint`` (the flow query's checkpoint) the companion's source plans no
batch of its own: each one ends where the flow's batch from the same start ended, and
while the flow has not planned past the start, there is no new data yet.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from streamsmith.io.kafka.offsets import json_within

log = logging.getLogger(__name__)

FOLLOW_CHECKPOINT = "followCheckpoint"  # the source option
Offsets = dict[str, dict[str, int]]  # Spark's JSON form: {topic: {partition: offset}}


def flow_batch_ends(checkpoint: Path) -> list[Offsets]:
    """The end offsets of each batch the query of ``checkpoint`` planned, in batch order;
    only for a query with this one source (a flow that joins other streams is not
    followed)."""
    ends: dict[int, Offsets] = {}
    for file in (checkpoint / "offsets").glob("[0-9]*"):
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            continue  # being replaced by Spark
        if len(lines) == 3:  # version, metadata, the one source's offsets
            ends[int(file.name)] = json.loads(lines[2])
    return [ends[batch] for batch in sorted(ends)]


def followed_end(checkpoint: Path, start: Offsets, own: Offsets) -> Offsets:
    """The end of this query's next batch from ``start``: the end of the flow's batch
    that began at ``start``; ``start`` itself (no new data) while the flow has not
    planned that batch; ``own`` (this query's own plan) when the two never share a batch
    boundary, which it logs."""
    ends = flow_batch_ends(checkpoint)
    if start in ends:
        last = max(i for i, end in enumerate(ends) if end == start)  # no-data batches repeat
        following = ends[last + 1] if last + 1 < len(ends) else start
    elif not ends:
        following = start
    elif json_within(start, ends[0]):  # both began at the same offsets
        following = ends[0]
    else:
        log.warning(
            "batches from %s are not in the followed query's offset log %s; planning them "
            "independently",
            start,
            checkpoint,
        )
        return own
    return following if json_within(following, own) else start


def as_offsets(document: Any) -> Offsets:
    """Spark's start offsets (a dict already, or its JSON text) as plain dicts."""
    return json.loads(document) if isinstance(document, str) else dict(document)
