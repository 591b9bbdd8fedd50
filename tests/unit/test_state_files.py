"""State files are written durably and whole; an empty or torn one is a message naming it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pyspark.sql.types import LongType, StructField, StructType

from streamsmith.errors import UserError
from streamsmith.io.schema_store import record, versions
from streamsmith.io.state_files import read_json_state, write_durably
from streamsmith.runtime.checkpoints import record_fingerprint, stored_fingerprint
from streamsmith.runtime.late import MaxEventTimes


def test_a_state_file_is_replaced_whole_with_its_mode_and_no_staging_left(tmp_path: Path) -> None:
    target = tmp_path / "server.json"
    write_durably(target, '{"port": 1}', mode=0o600)
    write_durably(target, '{"port": 2}', mode=0o600)
    assert json.loads(target.read_text()) == {"port": 2}
    assert os.stat(target).st_mode & 0o777 == 0o600
    with pytest.raises(FileExistsError):
        write_durably(target, "{}", exclusive=True)
    assert [p.name for p in tmp_path.iterdir()] == ["server.json"]


def test_empty_or_torn_state_files_are_user_errors_naming_them(tmp_path: Path) -> None:
    schema = StructType([StructField("n", LongType())])
    record(tmp_path / "schemas", schema, "inferred")
    assert [v.version for v in versions(tmp_path / "schemas")] == [0]
    (tmp_path / "schemas/0.json").write_text("")  # what a power loss left
    with pytest.raises(UserError, match=r"state file .*schemas/0\.json is empty"):
        versions(tmp_path / "schemas")
    record_fingerprint(tmp_path / "cp", {"code": "abc"})
    assert stored_fingerprint(tmp_path / "cp") == {"code": "abc"}
    fingerprint = next((tmp_path / "cp").iterdir())
    fingerprint.write_text('{"code": "a')
    with pytest.raises(UserError, match=f"state file {fingerprint} is not whole JSON"):
        stored_fingerprint(tmp_path / "cp")
    times = MaxEventTimes(tmp_path / "late", keep=2)
    times.record(0, 5_000)
    assert times.watermark_before(1, 1_000) == 4_000
    # Each file holds the largest so far, so the oldest go: the folder stays small.
    for batch, newest in ((1, 3_000), (2, 9_000), (3, 1_000), (4, 2_000)):
        times.record(batch, newest)
    assert sorted(f.name for f in (tmp_path / "late").iterdir()) == ["2", "3", "4"]
    assert times.watermark_before(5, 1_000) == 8_000
    assert times.watermark_before(4, 1_000) == 8_000  # batch 4 replayed: as it first ran
    times = MaxEventTimes(tmp_path / "late")
    times.record(0, 5_000)
    (tmp_path / "late/0").write_text("")
    with pytest.raises(UserError, match="late/0 is empty"):
        times.watermark_before(1, 1_000)
    with pytest.raises(UserError, match="remove it"):
        read_json_state(tmp_path / "late/0", "remove it")
