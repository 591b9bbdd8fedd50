"""A checkpoint read from its files, in the layout Spark 4 writes (tests/streaming and
tests/integration compare the reader with Spark's own on real queries)."""

from __future__ import annotations

import json
from pathlib import Path

from streamsmith.runtime.checkpoint_files import clear_interrupted_writes, read_checkpoint


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_transform_with_state_checkpoint_names_its_variables_and_rows(tmp_path: Path) -> None:
    write(tmp_path / "metadata", '{"id":"q-1"}')
    for batch in (3, 4):
        write(tmp_path / "offsets" / str(batch), f'v1\n{{}}\n{{"logOffset":{batch}}}')
    write(tmp_path / "offsets" / "5", 'v1\n{}\n{"logOffset":5}')  # planned, not committed
    for batch in (3, 4):
        write(tmp_path / "commits" / str(batch), 'v1\n{"nextBatchWatermarkMs":0}')
    properties = {"timeMode": "NoTime", "stateVariables": [{"stateName": "count"}]}
    operator = {"operatorInfo": {"operatorId": 0, "operatorName": "transformWithStateInPandasExec"},
                "stateStoreInfo": [{"storeName": "default", "numColsPrefixKey": 0,
                                    "numPartitions": 2}],
                "operatorPropertiesJson": json.dumps(properties)}  # fmt: skip
    write(tmp_path / "state/0/_metadata/v2/4", "v2\n" + json.dumps(operator))
    (tmp_path / "state/1/0").mkdir(parents=True)  # an operator Spark kept no metadata for
    (tmp_path / "state/1/1").mkdir(parents=True)
    progress = {"stateOperators": [{"operatorName": "transformWithStateInPandasExec",
                                    "numRowsTotal": 3}]}  # fmt: skip
    events = [
        {"event": "progress", "query_id": "q-1", "batch_id": 4, "progress": json.dumps(progress)},
        {"event": "progress", "query_id": "other", "batch_id": 9, "progress": "{}"},
    ]

    view = read_checkpoint("app.flow", tmp_path, events)
    assert (view.query_id, view.last_batch, view.first_commit, view.last_commit) == (
        "q-1", 5, 3, 4
    )  # fmt: skip
    assert view.offsets == [{"logOffset": 5}]
    tws, bare = view.operators
    assert (tws.name, tws.stores, tws.partitions, tws.parts) == (
        "transformWithStateInPandasExec", ("default",), 2, ("count",)
    )  # fmt: skip
    assert (tws.rows, tws.rows_batch) == (3, 4)
    assert (bare.operator_id, bare.name, bare.partitions, bare.rows) == (
        1, "(no state metadata)", 2, None
    )  # fmt: skip
    assert not read_checkpoint("app.new", tmp_path / "none").exists


def test_only_the_leftovers_of_interrupted_writes_are_cleared(tmp_path: Path) -> None:
    kept = ["0", ".0.crc", "1", ".1.crc"]
    leftovers = [
        ".2.0b7f5e2a-9c1d-4e8f-a3b2-6d5c4e3f2a1b.tmp",
        "..2.0b7f5e2a-9c1d-4e8f-a3b2-6d5c4e3f2a1b.tmp.crc",
    ]
    for folder in ("offsets", "commits"):
        (tmp_path / folder).mkdir()
        for name in kept + leftovers:
            (tmp_path / folder / name).write_text("v1\n")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / leftovers[0]).write_text("not ours to judge")
    removed = clear_interrupted_writes(tmp_path)
    assert sorted(path.name for path in removed) == sorted(leftovers * 2)
    for folder in ("offsets", "commits"):
        assert sorted(path.name for path in (tmp_path / folder).iterdir()) == sorted(kept)
    assert (tmp_path / "state" / leftovers[0]).exists()
    assert clear_interrupted_writes(tmp_path / "missing") == []
