"""A Spark Declarative Pipelines project runs unchanged on streamsmith, in-process: its
``pyspark.pipelines`` definitions and SQL become flows and materialized views whose Delta
tables keep their state, so a second catch-up reads only the new input; a mistake in a
definition is one line naming the file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from sdp_cdc import deliver as deliver_changes
from sdp_cdc import expected as cdc_expected
from sdp_cdc import tables as cdc_tables
from sdp_cdc import write_project as write_cdc_project
from sdp_shop import DATASETS, deliver, expected, write_project
from streamsmith.config import CdcSpec
from streamsmith.errors import UserError
from streamsmith.runtime.plan import build_plan
from streamsmith.runtime.runner import RunReport, run_pipeline
from streamsmith.sdp.loader import load_project


def catch_up(spark: SparkSession, folder: Path) -> RunReport:
    app, spec, _ = load_project(folder / "spark-pipeline.yml", spark=spark)
    return run_pipeline(spark, build_plan(app, spec))


def tables(folder: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every dataset's rows, read from its Delta log without Spark."""
    found = {}
    for name in DATASETS:
        rows = DeltaTable(str(folder / "pipeline-storage/tables" / name)).to_pyarrow_table()
        found[name] = sorted(tuple(row.values()) for row in rows.to_pylist())
    return found


@pytest.mark.deep  # make test runs the same two catch-ups through the CLI (test_sdp_cli.py)
def test_a_second_catch_up_reads_only_the_new_chunk_into_every_dataset(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_project(tmp_path)
    deliver(tmp_path, 0)
    first = catch_up(spark, tmp_path)
    assert tables(tmp_path) == expected(1)
    read = {query.name: query.input_rows for query in first.queries}
    assert read["shop.orders_raw"] == 3

    deliver(tmp_path, 1)
    second = catch_up(spark, tmp_path)
    assert tables(tmp_path) == expected(2)
    read = {query.name: query.input_rows for query in second.queries}
    # the streaming tables read only what the first run had not: the new file, and the
    # rows appended upstream since
    assert read["shop.orders_raw"] == read["shop.orders_silver"] == 3


@pytest.mark.parametrize(
    ("file", "old", "new", "error"),
    [
        (
            "transformations/orders.py",
            'withColumn("amount_cents", cents)',
            'withColumn("amount_cents", F.col("amount_in_euros"))',
            "transformations/orders.py:28: streaming table orders_silver: "
            "AnalysisException: [UNRESOLVED_COLUMN.WITH_SUGGESTION]",
        ),
        (
            "transformations/gold.sql",
            "JOIN customers c",
            "JOIN clients c",
            "transformations/gold.sql:2: materialized view revenue_by_customer: "
            "AnalysisException: [TABLE_OR_VIEW_NOT_FOUND] The table or view `clients`",
        ),
        (
            "transformations/gold.sql",
            "CREATE STREAMING TABLE big_orders",
            "CREATE STREAMING LIVE TABLE big_orders",
            "transformations/gold.sql:7: unsupported SQL statement: CREATE STREAMING LIVE",
        ),
    ],
    ids=["unknown column", "unknown table", "unsupported SQL"],
)
def test_a_mistake_is_one_line_naming_the_file_and_line(
    spark: SparkSession, tmp_path: Path, file: str, old: str, new: str, error: str
) -> None:
    write_project(tmp_path)
    path = tmp_path / file
    path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    with pytest.raises(UserError) as raised:
        load_project(tmp_path / "spark-pipeline.yml", spark=spark)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(error), message
    assert not (tmp_path / "pipeline-storage/tables").exists()  # nothing written


EXPECTING_SQL = """\
CREATE STREAMING TABLE paid (
  CONSTRAINT known_customer EXPECT (customer IS NOT NULL) ON VIOLATION DROP ROW,
  CONSTRAINT sensible EXPECT (amount < 1000)
) AS SELECT order_id, customer, amount FROM STREAM(orders);
"""
ORDERS_PY = """\
from pyspark import pipelines as dp

@dp.table
def orders():
    return spark.readStream.schema("order_id string, customer string, amount double").json(
        spark.conf.get("orders.input")
    )
"""


def test_lakeflow_constraints_in_sql_drop_and_count_as_expectations(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "input").mkdir()
    (tmp_path / "input/1.json").write_text(
        '{"order_id": "a", "customer": "c1", "amount": 5}\n'
        '{"order_id": "b", "amount": 7}\n'
        '{"order_id": "c", "customer": "c2", "amount": 5000}\n',
        encoding="utf-8",
    )
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows/orders.py").write_text(ORDERS_PY, encoding="utf-8")
    (tmp_path / "flows/paid.sql").write_text(EXPECTING_SQL, encoding="utf-8")
    (tmp_path / "spark-pipeline.yml").write_text(
        f"name: expecting\nstorage: {tmp_path}/storage\n"
        f"configuration: {{orders.input: {tmp_path}/input}}\n"
        "libraries: [{glob: {include: flows/**}}]\n",
        encoding="utf-8",
    )
    app, spec, _ = load_project(tmp_path / "spark-pipeline.yml", spark=spark)
    run_pipeline(spark, build_plan(app, spec))
    paid = DeltaTable(str(tmp_path / "storage/tables/paid")).to_pyarrow_table().to_pylist()
    # the row without a customer is dropped; the one over 1000 only counted (warn)
    assert sorted(row["order_id"] for row in paid) == ["a", "c"]


def test_a_streamsmith_yml_beside_the_spec_sets_what_streamsmith_adds(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_project(tmp_path)
    (tmp_path / "streamsmith.yml").write_text(
        "trigger: interval=5s\nflows:\n  orders_raw: {description: raw orders as sent}\n",
        encoding="utf-8",
    )
    app, spec, loaded = load_project(tmp_path / "spark-pipeline.yml", spark=spark)
    assert (spec.trigger, spec.flows["orders_raw"].description) == (
        "interval=5s", "raw orders as sent",
    )  # fmt: skip
    assert spec.flows["orders_silver"].source == "orders_raw"  # the graph's own
    assert sorted(view.name for view in app.views) == [
        "customers", "example_python_materialized_view", "example_sql_materialized_view",
        "revenue_by_customer",
    ]  # fmt: skip
    assert loaded.facts["region_events_us"].streamed == ("orders_raw",)


def test_auto_cdc_flows_keep_scd1_and_scd2_tables_across_catch_ups(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_cdc_project(tmp_path)
    deliver_changes(tmp_path, 0)
    app, spec, _ = load_project(tmp_path / "spark-pipeline.yml", spark=spark)
    assert (spec.flows["customers_history_cdc"].cdc, spec.flows["customers"].cdc) == (
        CdcSpec(keys=("id",), sequence_by="seq", apply_as_deletes="op = 'DELETE'",
                except_columns=("op", "seq"), scd_type=2),
        CdcSpec(keys=("id",), sequence_by="seq", apply_as_deletes="op = 'DELETE'",
                except_columns=("op", "seq"), scd_type=1),
    )  # fmt: skip
    run_pipeline(spark, build_plan(app, spec))
    assert cdc_tables(tmp_path) == cdc_expected(1)

    deliver_changes(tmp_path, 1)
    catch_up(spark, tmp_path)
    assert cdc_tables(tmp_path) == cdc_expected(2)
