"""The chaos run's short profile, as ``make test-deep`` runs it (about 3.5 minutes, out
of ``make test``'s budget, whose crash tests kill each path on its own): five SIGKILLs
(a third or more while a batch is in flight), a SIGTERM, an approved upgrade, the broker
and PostgreSQL each taken away, 200 malformed records of twelve kinds (a gzip file cut
short among them); nothing lost, nothing duplicated, every malformed record quarantined
with its reason (``benchmarks/chaos.py``; ``make test-chaos`` runs the full profile)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.deep]

CHAOS = Path(__file__).resolve().parents[2] / "benchmarks/chaos.py"


def test_the_short_chaos_profile_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    verdict_file = tmp_path / "verdict.json"
    # Its own temporary home under /tmp: PostgreSQL, run as its own user, must enter it.
    command = [sys.executable, str(CHAOS), "--profile", "short", "--seed", "3",
               "--outage", "10", "--json", str(verdict_file)]  # fmt: skip
    ran = subprocess.run(command, capture_output=True, text=True, timeout=1200, check=False)
    assert verdict_file.is_file(), ran.stderr[-3000:]
    verdict = json.loads(verdict_file.read_text())
    assert verdict["ok"], json.dumps(verdict, indent=1)
    assert ran.returncode == 0
    kinds = [fault["kind"] for fault in verdict["faults"]]
    assert sorted(set(kinds)) == ["broker", "kill", "postgres", "sigterm", "upgrade"]
    assert verdict["kills_mid_batch"] >= (kinds.count("kill") + 2) // 3
    assert verdict["malformed_kinds"] >= 10
    for path in verdict["paths"].values():
        assert path["lost"] == path["duplicated"] == path["unexpected"] == 0
        assert path["quarantined"] == path["sent_malformed"] > 0
    assert sum(p["sent_malformed"] for p in verdict["paths"].values()) >= 200
    assert verdict["postgres_wrong_windows"] == 0 and verdict["gave_up"] == []
