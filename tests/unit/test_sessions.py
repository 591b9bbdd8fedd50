"""The activity-session processor under TwsTester: closes on change, gap and watermark."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
from pyspark.sql.streaming.tws_tester import TwsTester

from streamsmith.stateful.sessions import ActivitySessions, advance

T0 = datetime(2026, 11, 20, 10, tzinfo=UTC)
GAP_MS = 30_000


def readings(*rows: tuple[int, str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "User": ["a"] * len(rows),
            "gt": [activity for _, activity in rows],
            "event_time": [pd.Timestamp(T0 + timedelta(seconds=s)) for s, _ in rows],
        }
    )


def ms(seconds: int) -> int:
    return int((T0 + timedelta(seconds=seconds)).timestamp() * 1000)


def new_tester() -> TwsTester:
    return TwsTester(
        ActivitySessions(GAP_MS),
        timeMode="EventTime",
        outputMode="Append",
        eventTimeExtractor=lambda row: int(pd.Timestamp(row["event_time"]).timestamp() * 1000),
    )


def test_a_new_activity_closes_the_session_and_the_watermark_closes_the_last() -> None:
    run = new_tester()
    out = run.testInPandas("a", readings((0, "walk"), (10, "walk"), (25, "walk"), (40, "sit")))
    assert out[["activity", "readings"]].values.tolist() == [["walk", 3]]
    assert out["start"][0] == pd.Timestamp(T0) and out["end"][0] == pd.Timestamp(
        ms(25), unit="ms", tz="UTC"
    )
    assert run.peekValueState("session", "a") == ("sit", ms(40), ms(40), 1, 0)
    assert len(run.setWatermark(ms(40) + GAP_MS - 1)) == 0  # not yet past the gap
    closed = run.setWatermark(ms(40) + GAP_MS)
    assert closed[["activity", "readings"]].values.tolist() == [["sit", 1]]
    assert run.peekValueState("session", "a") is None  # state cleared with the session


def test_a_gap_closes_a_session_of_the_same_activity() -> None:
    out = new_tester().testInPandas("a", readings((0, "bike"), (20, "bike"), (100, "bike")))
    assert out[["activity", "readings"]].values.tolist() == [["bike", 2]]


def test_late_readings_of_another_activity_are_counted_as_stale() -> None:
    session, closed = advance(("walk", ms(0), ms(60), 4, 0), "sit", ms(30), GAP_MS)
    assert closed is None and session == ("walk", ms(0), ms(60), 4, 1)
    session, closed = advance(session, "walk", ms(-10), GAP_MS)  # out of order, same activity
    assert closed is None and session == ("walk", ms(-10), ms(60), 5, 1)
