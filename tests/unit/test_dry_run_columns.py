"""What ``run`` refuses about the columns a sink or ``cdc`` names, ``dry-run`` refuses
too, in the same one line and before anything is read: both call
``streamsmith.runtime.start.check_user_flows`` (dry-run over empty stand-ins)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from streamsmith.cli import cli
from streamsmith.errors import UserError
from streamsmith.pipelines import load_pipeline
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.start import analyse_flows, analysed_flows

CENSUS: dict[str, Any] = {
    "name": "census",
    "storage_root": "data",
    "sources": {"figures": {"format": "jsonl", "path": "input/figures",
                            "schema": "country string, year int, people bigint, op string"}},
    "flows": {
        "countries": {
            "source": "figures", "sql": "SELECT * FROM figures",
            "sink": {"format": "delta", "table": "countries"},
            "cdc": {"keys": ["country"], "sequence_by": "year",
                    "apply_as_deletes": "op = 'DELETE'", "except_columns": ["op"],
                    "scd_type": 2, "track_history_columns": ["people"]},
        },
        "per_year": {
            "source": "figures",
            "sql": "SELECT year, count(*) AS countries FROM figures GROUP BY year",
            "sink": {"format": "delta", "table": "per_year", "output_mode": "update",
                     "keys": ["year"], "partition_by": ["year"]},
        },
    },
}  # fmt: skip


def changed(flow: str, where: str, value: object) -> dict[str, Any]:
    document = copy.deepcopy(CENSUS)
    *path, key = where.split(".")
    block = document["flows"][flow]
    for part in path:
        block = block[part]
    block[key] = value
    return document


def analyse(spark: SparkSession, folder: Path, document: dict[str, Any]) -> None:
    (folder / "streamsmith.yml").write_text(yaml.safe_dump(document))
    app, spec = load_pipeline(folder / "streamsmith.yml")
    plan = build_plan(app, spec)
    assert [flow.name for flow in analysed_flows(plan)] == ["countries", "per_year"]
    analyse_flows(spark, plan)  # the input folder does not exist: nothing is read


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (changed("countries", "cdc.keys", ["contry"]),
         "flow 'countries': cdc names column(s) contry that the flow's output lacks (its "
         "columns: country, year, people, op)"),
        (changed("countries", "cdc.track_history_columns", ["peeple"]),
         "flow 'countries': cdc names column(s) peeple that the flow's output lacks"),
        (changed("countries", "cdc.except_columns", ["opp"]),
         "flow 'countries': cdc names column(s) opp that the flow's output lacks"),
        (changed("countries", "cdc.sequence_by", "yeer"),
         "flow 'countries': cdc.sequence_by 'yeer' cannot be computed from the flow's output "
         "(its columns: country, year, people, op): [UNRESOLVED_COLUMN"),
        (changed("countries", "cdc.apply_as_deletes", "opp = 'DELETE'"),
         "flow 'countries': cdc.apply_as_deletes \"opp = 'DELETE'\" cannot be computed from"),
        (changed("per_year", "sink.keys", ["yaer"]),
         "flow 'per_year': sink.keys names column(s) yaer that the flow's output lacks (its "
         "columns: year, countries)"),
        (changed("per_year", "sink.partition_by", ["yr"]),
         "flow 'per_year': sink.partition_by names column(s) yr that the flow's output lacks"),
        (changed("per_year", "expect", {"some": "contries > 0"}),
         "flows.per_year: expectation some ('contries > 0') cannot be judged"),
    ],
)  # fmt: skip
def test_dry_run_refuses_a_column_run_would_refuse(
    spark: SparkSession, tmp_path: Path, document: dict[str, Any], message: str
) -> None:
    with pytest.raises(UserError) as refused:
        analyse(spark, tmp_path, document)
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "data").exists()  # nothing written


def test_dry_run_accepts_the_columns_as_spelled(spark: SparkSession, tmp_path: Path) -> None:
    analyse(spark, tmp_path, CENSUS)


def test_plan_only_says_what_it_leaves_to_spark(tmp_path: Path) -> None:
    """Without Spark no flow's output columns are known: ``--plan-only`` says so."""
    (tmp_path / "streamsmith.yml").write_text(
        yaml.safe_dump(changed("countries", "cdc.keys", ["contry"]))
    )
    shown = CliRunner().invoke(cli, ["dry-run", str(tmp_path / "streamsmith.yml"), "--plan-only"])
    assert shown.exit_code == 0, shown.output
    assert "changes applied on contry (scd type 2)" in shown.stdout
    assert shown.stderr == (
        "not analysed (--plan-only): flow countries, flow per_year; the columns their code, "
        "expectations, sinks and cdc name are checked by `streamsmith dry-run`\n"
    )
