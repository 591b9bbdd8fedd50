"""Child process of the change data capture crash test: ``streamsmith run SPEC --trigger
available-now`` (one file per micro-batch) with one flow on and one fault on micro-batch
BATCH:

- ``between``: SIGKILL after the batch's commit to the table, before its commit to the
  table's tombstones (type 1) or change log (type 2);
- ``after``: SIGKILL after both commits, before Spark records the batch as done;
- ``none``: no fault.

Run as ``python cdc_child.py SPEC FLOW FAULT BATCH``.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from streamsmith.cli import cli
from streamsmith.io import cdc

FLOWS = ("customers", "customer_history")


def main(spec: str, flow: str, fault: str, batch: str) -> None:
    faulty = int(batch)
    apply_changes = cdc.apply_changes
    merges = {"tombstones": cdc._merge_tombstones, "log": cdc._merge_change_log}
    current: list[int] = []

    def die() -> None:
        os.killpg(os.getpgid(0), signal.SIGKILL)

    def apply_then_die(*args: Any) -> None:
        current[:] = [args[4]]  # the batch id
        apply_changes(*args)
        if fault == "after" and args[4] == faulty:
            die()

    def die_before(merge: Any) -> Any:
        def call(*args: Any) -> None:
            if fault == "between" and current == [faulty]:
                die()
            merge(*args)

        return call

    cdc.apply_changes = apply_then_die  # type: ignore[assignment]
    cdc._merge_tombstones = die_before(merges["tombstones"])  # type: ignore[assignment]
    cdc._merge_change_log = die_before(merges["log"])  # type: ignore[assignment]
    off = [f"flows.{other}.enabled=false" for other in FLOWS if other != flow]
    cli(["run", spec, "--trigger", "available-now", *(a for s in off for a in ("--set", s))])


if __name__ == "__main__":
    main(*sys.argv[1:])
