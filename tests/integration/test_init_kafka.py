"""The tutorial "From Kafka to PostgreSQL" (docs/tutorials/kafka-to-postgres.md),
executed: ``init --source kafka``, a broker the project starts, the sample produced,
counts upserted into PostgreSQL, a second delivery whose late records land in the late
table. (The generated tests are those of the files project, which test_init runs, but
for the source of their prefix-integrity check: a broker they start.)"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from deltalake import DeltaTable
from tutorials import follow, free_port, run

TUTORIAL = Path(__file__).resolve().parents[2] / "docs/tutorials/kafka-to-postgres.md"


@pytest.fixture
def home() -> Iterator[Path]:
    """A folder PostgreSQL's user may enter (see test_init); what the tutorial started
    is stopped here should it fail half-way."""
    from streamsmith.io.postgres.server import embedded_home, postgres_status, stop_postgres

    base = Path(tempfile.mkdtemp(prefix="streamsmith-kafka-tutorial-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        data = base / "clicks/data"
        if postgres_status(embedded_home(data)) is not None:
            stop_postgres(embedded_home(data), "immediate")
        if (data / "broker").exists():
            run("streamsmith broker stop", base / "clicks")
        shutil.rmtree(base)


def counts(root: Path) -> int:
    from streamsmith.io.postgres.server import embedded_home, postgres_status

    server = postgres_status(embedded_home(root))
    assert server is not None
    with psycopg.connect(server.dsn) as conn:
        row = conn.execute("SELECT sum(clicks) FROM clicks_per_minute").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


@pytest.mark.deep  # make test executes the first tutorial; this one, make test-deep
def test_the_kafka_to_postgres_tutorial_runs_as_written(home: Path) -> None:
    # Port 9092 may be taken on a test machine: the reader would pick another, so do we.
    port = str(free_port())
    runs, ran, cwd = 0, [], home
    tutorial = TUTORIAL.read_text(encoding="utf-8").replace("9092", port)
    for text, cwd, result in follow(tutorial, home):
        ran.append(text)
        if text.startswith("streamsmith init"):  # its spec names the broker's port too
            spec = cwd / "clicks/streamsmith.yml"
            spec.write_text(spec.read_text().replace("9092", port))
        if text.startswith("streamsmith topic produce"):
            assert "produced 17 records to topic clicks" in result.stdout
        if text == "streamsmith run --trigger available-now":
            runs += 1
            data = cwd / "data"
            if runs == 1:  # every valid record counted; two quarantined with their reason
                assert counts(data) == 15
                quarantine = DeltaTable(
                    str(data / "tables/clicks_per_minute_quarantine")
                ).to_pyarrow_table()
                # Read as the file source reads the same sample: the same reasons.
                assert sorted(quarantine.column("reason").to_pylist()) == [
                    'field ts: "not a time" is not a timestamp (ISO 8601, e.g. '
                    "2001-01-06T15:01:00; set options.timestampFormat)",
                    "missing or invalid field user",
                ]
            else:  # the same records again: 12 behind the 10:07 watermark, 3 counted
                assert counts(data) == 18
                late = (
                    DeltaTable(str(data / "tables/clicks_per_minute_late"))
                    .to_pyarrow_table()
                    .to_pylist()
                )
                assert len(late) == 12
                assert {row["watermark"].strftime("%H:%M") for row in late} == {"10:07"}
    assert ran[-1] == "streamsmith broker stop" and runs == 2
