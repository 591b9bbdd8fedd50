"""``streamsmith`` with guarantees off that the spec cannot switch off, for
``real_volume.py --guarantees`` (a benchmark's measurement, not a way to run a pipeline):

    python without.py quarantine,late -- run PROJECT --trigger available-now ...

``quarantine``: no quarantine query (and the main query carries no rejects);
``late``: no late-events query; ``counts``: the main query observes nothing (records
read, rejects, oldest event time), so side queries read their input, and no query
counts the lines of the files it reads whole; ``event_log``: no events recorded (no
listener). The rest is ``streamsmith``'s own command line.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any


def drop_queries(roles: set[str]) -> None:
    from streamsmith.runtime import runner

    supervise = runner.supervise

    def without_roles(spark: Any, plan: Any, stop: Any = None) -> Any:
        flows = tuple(
            replace(flow, outputs=tuple(o for o in flow.outputs if o.role not in roles))
            for flow in plan.flows
        )
        return supervise(spark, plan.only(flows), stop)

    runner.supervise = without_roles  # type: ignore[assignment]


def no_counts() -> None:
    from streamsmith.io import files
    from streamsmith.runtime import frames

    frames.observe_flow = lambda tagged, *args, **kwargs: tagged  # type: ignore[assignment]
    files._read_counter = lambda streaming: lambda frame, metric: frame  # type: ignore[assignment]


def no_event_log() -> None:
    from streamsmith.monitor.recorder import Monitor

    Monitor.attach = lambda self, spark, health: None  # type: ignore[method-assign]
    Monitor.detach = lambda self, spark: None  # type: ignore[method-assign]
    Monitor.record = lambda self, record: record  # type: ignore[method-assign]


SWITCHES = {
    "quarantine": lambda: drop_queries({"quarantine"}),
    "late": lambda: drop_queries({"late"}),
    "counts": no_counts,
    "event_log": no_event_log,
}


def main() -> None:
    wanted, dashes, *rest = sys.argv[1:]
    assert dashes == "--", __doc__
    for name in filter(None, wanted.split(",")):
        SWITCHES[name]()
    from streamsmith.cli import main as streamsmith

    sys.argv = ["streamsmith", *rest]
    streamsmith()


if __name__ == "__main__":
    main()
