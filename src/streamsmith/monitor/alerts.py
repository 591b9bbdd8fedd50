"""Service-level alerts from progress records: falling behind, slow batches, lag,
watermark delay and quarantine rate.

:class:`SloWatch` keeps, per query, which conditions hold; an alert is raised when a
condition starts to hold and not again until it has cleared (edge-triggered), so one
sustained problem is one alert. Everything here is pure: records in, alerts out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streamsmith.config import AlertRules, parse_duration


@dataclass(frozen=True)
class SloAlert:
    """One raised service-level alert."""

    rule: str
    query: str
    message: str
    severity: str = "warning"


@dataclass
class _QueryState:
    behind_batches: int = 0
    holding: set[str] = field(default_factory=set)


class SloWatch:
    """Evaluates :class:`AlertRules` on each query's progress records, in order."""

    def __init__(self, rules: AlertRules, trigger_seconds: Mapping[str, float]) -> None:
        self.rules = rules
        self.trigger_seconds = dict(trigger_seconds)  # query name -> interval (0: none)
        self._state: dict[str, _QueryState] = {}

    def observe(self, record: Mapping[str, Any]) -> list[SloAlert]:
        """The alerts that start with this progress record."""
        query = str(record.get("query"))
        state = self._state.setdefault(query, _QueryState())
        holding = self._conditions(record, state)
        started = [SloAlert(rule, query, message) for rule, message in holding.items()]
        started = [alert for alert in started if alert.rule not in state.holding]
        state.holding = set(holding)
        return started

    def _conditions(self, record: Mapping[str, Any], state: _QueryState) -> dict[str, str]:
        rules, found = self.rules, {}
        rows = int(record.get("input_rows") or 0)
        input_rate, process_rate = record.get("input_rate"), record.get("process_rate")
        if rows and input_rate is not None and process_rate is not None:
            behind = input_rate > process_rate
            state.behind_batches = state.behind_batches + 1 if behind else 0
        else:
            state.behind_batches = 0
        if rules.falling_behind_batches and state.behind_batches >= rules.falling_behind_batches:
            found["falling_behind"] = (
                f"input rate above processing rate for {state.behind_batches} batches "
                f"(last: {input_rate:.1f} vs {process_rate:.1f} rows/s)"
            )
        interval = self.trigger_seconds.get(str(record.get("query")), 0.0)
        batch_ms = record.get("batch_ms")
        if rules.slow_batches and interval > 0 and batch_ms and batch_ms > interval * 1000:
            found["slow_batch"] = (
                f"batch {record.get('batch_id')} took {batch_ms / 1000:.1f} s, "
                f"longer than the {interval:g} s trigger interval{slowest_stages(record)}"
            )
        lag = record.get("lag")
        if rules.max_lag is not None and lag is not None and lag > rules.max_lag:
            found["lag"] = f"source lag {lag} is above {rules.max_lag}"
        delay = record.get("watermark_delay_s")
        if rules.max_watermark_delay and delay is not None:
            limit = parse_duration(rules.max_watermark_delay)
            if delay > limit:
                found["watermark_delay"] = (
                    f"watermark is {delay:.0f} s behind the batch time (limit {limit:g} s)"
                )
        quarantined = record.get("quarantined")
        if rules.max_quarantine_ratio is not None and quarantined and rows:
            ratio = quarantined / rows
            if ratio > rules.max_quarantine_ratio:
                found["quarantine_rate"] = (
                    f"{quarantined} of {rows} input rows quarantined ({ratio:.1%}, "
                    f"limit {rules.max_quarantine_ratio:.1%})"
                )
        return found


def slowest_stages(record: Mapping[str, Any], most: int = 4) -> str:
    """``: addBatch 12.1 s, queryPlanning 2.0 s`` from a progress record's batch
    durations (Spark's ``durationMs``): the stages of at least 0.1 s, slowest first, which
    say where a slow batch spent its time (writing, planning, listing the source, the
    checkpoint's log); empty when the record has none."""
    try:
        durations = json.loads(str(record.get("progress") or "{}")).get("durationMs") or {}
    except json.JSONDecodeError:
        return ""
    stages = sorted(
        ((int(ms), stage) for stage, ms in durations.items()
         if stage != "triggerExecution" and ms is not None and int(ms) >= 100),
        reverse=True,
    )  # fmt: skip
    if not stages:
        return ""
    return ": " + ", ".join(f"{stage} {ms / 1000:.1f} s" for ms, stage in stages[:most])
