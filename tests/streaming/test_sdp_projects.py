"""A Spark Declarative Pipelines project runs unchanged on streamsmith, in-process: its
``pyspark.pipelines`` definitions and SQL become flows and materialized views whose Delta
tables keep their state, so a second catch-up reads only the new input; a mistake in a
definition is one line naming the file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from sdp_cdc import (
    PARTIAL_EXPECTED,
    TWO_SOURCES_EXPECTED,
    sorted_tables,
    write_partial_project,
    write_two_sources_project,
)
from sdp_cdc import deliver as deliver_changes
from sdp_cdc import expected as cdc_expected
from sdp_cdc import tables as cdc_tables
from sdp_cdc import write_project as write_cdc_project
from sdp_expecting import EXPECTING_PY, ORDERS
from sdp_shop import DATASETS, deliver, expected, write_project
from sdp_sinks import SINKS_PY
from streamsmith.config import CdcSpec
from streamsmith.errors import UserError
from streamsmith.io.kafka.broker import EmbeddedBroker
from streamsmith.io.kafka.source import SOURCE_NAME, register_kafka_source
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


def orders_project(folder: Path, name: str, orders: str, files: dict[str, str]) -> None:
    """Project ``name`` in ``folder``: ``files`` (name: code) under ``flows/``, which read
    ``orders`` (JSON lines) from the folder the setting ``orders.input`` names."""
    (folder / "input").mkdir()
    (folder / "input/1.json").write_text(orders, encoding="utf-8")
    (folder / "flows").mkdir()
    for file, code in files.items():
        (folder / "flows" / file).write_text(code, encoding="utf-8")
    (folder / "spark-pipeline.yml").write_text(
        f"name: {name}\nstorage: {folder}/storage\n"
        f"configuration: {{orders.input: {folder}/input}}\n"
        "libraries: [{glob: {include: flows/**}}]\n",
        encoding="utf-8",
    )


@pytest.mark.deep  # make test: test_sdp_commands.py's project has them, values asserted
def test_lakeflow_constraints_in_sql_drop_and_count_as_expectations(
    spark: SparkSession, tmp_path: Path
) -> None:
    orders = ORDERS.splitlines(keepends=True)[:3]
    orders_project(
        tmp_path, "expecting", "".join(orders), {"orders.py": ORDERS_PY, "paid.sql": EXPECTING_SQL}
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


def test_auto_cdc_ignores_null_updates_and_truncates_in_python_and_sql(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_partial_project(tmp_path)
    app, spec, _ = load_project(tmp_path / "spark-pipeline.yml", spark=spark)
    assert spec.flows["customers_since_reset_cdc"].cdc == CdcSpec(
        keys=("id",), sequence_by="seq", apply_as_deletes="op = 'DELETE'",
        except_columns=("op", "seq"), ignore_null_updates=True,
        apply_as_truncates="op = 'TRUNCATE'",
    )  # fmt: skip
    run_pipeline(spark, build_plan(app, spec))
    assert sorted_tables(tmp_path, PARTIAL_EXPECTED) == {
        name: sorted(rows, key=repr) for name, rows in PARTIAL_EXPECTED.items()
    }

    # What streamsmith does not run is refused as the project loads: one line each.
    code = tmp_path / "transformations/changes.py"
    python = code.read_text(encoding="utf-8")
    for changed, error in [
        (
            python.replace("ignore_null_updates=True,", "apply_as_truncates=\"op = 'T'\","),
            "ValueError: AUTO CDC flow 'customer_versions': apply_as_truncates (APPLY AS "
            "TRUNCATE WHEN) is for SCD type 1 only",
        ),
        (
            python
            + python.split('dp.create_streaming_table("customer_versions")')[1].replace(
                "stored_as_scd_type=2,", "stored_as_scd_type=1, name='more_versions',"
            ),
            "AUTO CDC flows 'customer_versions' and 'more_versions' into 'customer_versions' "
            "differ in their SCD type, tracked columns, table columns",
        ),
    ]:
        code.write_text(changed, encoding="utf-8")
        with pytest.raises(UserError) as raised:
            load_project(tmp_path / "spark-pipeline.yml", spark=spark)
        assert "\n" not in str(raised.value)
        assert error in str(raised.value), raised.value


def test_several_auto_cdc_flows_from_two_sources_apply_their_changes_to_one_table(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_two_sources_project(tmp_path)
    app, spec, _ = load_project(tmp_path / "spark-pipeline.yml", spark=spark)
    plan = build_plan(app, spec)
    flows = {flow.name: flow.outputs[0] for flow in plan.flows}
    ours = [f"customers_scd{scd}_from_{origin}" for scd in (1, 2) for origin in ("crm", "web")]
    assert len({flows[name].checkpoint for name in ours}) == 4  # each its own checkpoint
    run_pipeline(spark, plan)
    assert sorted_tables(tmp_path, TWO_SOURCES_EXPECTED) == {
        name: sorted(rows, key=repr) for name, rows in TWO_SOURCES_EXPECTED.items()
    }


def test_sdp_sinks_take_a_delta_path_and_a_kafka_topic_and_once_flows_run_once(
    spark: SparkSession, broker: EmbeddedBroker, topic: str, tmp_path: Path
) -> None:
    for folder, name, text in (
        ("input", "1", '{"order_id": "a", "amount": 5}\n{"order_id": "b", "amount": 70}\n'),
        ("history", "1", '{"order_id": "h1", "amount": 1}\n'),
        ("flows", "sinks.py", SINKS_PY),
    ):
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / name).write_text(text, encoding="utf-8")
    (tmp_path / "spark-pipeline.yml").write_text(
        f"name: sinking\nstorage: {tmp_path}/storage\nlibraries: [{{glob: {{include: flows/**}}}}]"
        f"\nconfiguration: {{orders.input: {tmp_path}/input, archive.path: {tmp_path}/archive, "
        f"history.input: {tmp_path}/history, alerts.servers: '{broker.bootstrap}', "
        f"alerts.topic: {topic}}}\n",
        encoding="utf-8",
    )
    catch_up(spark, tmp_path)
    (tmp_path / "history/2").write_text('{"order_id": "h2", "amount": 2}\n', encoding="utf-8")
    (tmp_path / "input/2").write_text('{"order_id": "c", "amount": 3}\n', encoding="utf-8")
    catch_up(spark, tmp_path)  # the once flow does not run again: h2 stays out

    def rows(path: Path) -> list[tuple[str, float]]:
        found = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
        return sorted((row["order_id"], row["amount"]) for row in found)

    orders = [("a", 5.0), ("b", 70.0), ("c", 3.0)]
    assert rows(tmp_path / "archive") == orders
    assert rows(tmp_path / "storage/tables/all_orders") == sorted([("h1", 1.0), *orders])
    register_kafka_source(spark)
    sent = spark.read.format(SOURCE_NAME).option("kafka.bootstrap.servers", broker.bootstrap)
    records = sent.option("subscribe", topic).load().collect()
    assert [(r.key, r.value) for r in records] == [(b"b", b'{"order_id":"b","amount":70.0}')]


@pytest.mark.deep  # make test: test_sdp_commands.py's project has them, values asserted
def test_lakeflow_expectation_decorators_warn_drop_and_quarantine_with_counts(
    spark: SparkSession, tmp_path: Path
) -> None:
    orders_project(tmp_path, "decorated", ORDERS, {"checked.py": EXPECTING_PY})
    report = catch_up(spark, tmp_path)
    tables = tmp_path / "storage/tables"
    kept = DeltaTable(str(tables / "checked")).to_pyarrow_table().to_pylist()
    assert sorted(row["order_id"] for row in kept) == ["a", "c"]  # c only warned
    held = DeltaTable(str(tables / "checked_quarantine")).to_pyarrow_table().to_pylist()
    assert sorted((row["reason"], json.loads(row["raw"])["order_id"]) for row in held) == [
        ("expectation known_customer failed", "b"),
        ("expectation positive failed", "d"),
    ]
    queries = {query.name: query for query in report.queries}
    main, quarantine = queries["decorated.checked"], queries["decorated.checked.quarantine"]
    # 5 read = 2 written + 2 quarantined + 1 dropped
    assert (main.input_rows, main.output_rows, quarantine.output_rows) == (5, 2, 2)


SETTINGS_PY = """\
from pyspark import pipelines as dp


@dp.table(table_properties={"quality": "bronze", "delta.appendOnly": "true"},
          cluster_by=["customer"])
def orders():
    schema = "order_id string, customer string, amount double"
    return spark.readStream.schema(schema).json(spark.conf.get("orders.input"))


@dp.materialized_view(table_properties={"quality": "gold"}, cluster_by=["customer"])
def by_customer():
    return spark.read.table("orders").groupBy("customer").count()
"""

SETTINGS_SQL = """\
CREATE STREAMING TABLE big TBLPROPERTIES ('quality' = 'silver') CLUSTER BY (order_id)
AS SELECT * FROM STREAM(orders) WHERE amount > 100;
"""


def test_table_properties_and_clustering_are_set_on_the_delta_tables(
    spark: SparkSession, tmp_path: Path
) -> None:
    orders_project(
        tmp_path, "settings", ORDERS, {"orders.py": SETTINGS_PY, "big.sql": SETTINGS_SQL}
    )

    def declared(name: str) -> tuple[dict[str, str], list[str]]:
        path = tmp_path / "storage/tables" / name
        (detail,) = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()
        found = DeltaTable(str(path)).metadata().configuration
        assert found == detail.properties  # delta-rs reads what Spark wrote
        return found, list(detail.clusteringColumns)

    catch_up(spark, tmp_path)
    assert declared("orders") == ({"quality": "bronze", "delta.appendOnly": "true"}, ["customer"])
    assert declared("by_customer") == ({"quality": "gold"}, ["customer"])
    assert declared("big") == ({"quality": "silver"}, ["order_id"])

    def rows(name: str) -> list[dict[str, Any]]:
        return DeltaTable(str(tmp_path / "storage/tables" / name)).to_pyarrow_table().to_pylist()

    assert [row["order_id"] for row in rows("big")] == ["c"]

    by_customer = sorted((r["customer"] or "", r["count"]) for r in rows("by_customer"))
    assert by_customer == [("", 1), ("c1", 1), ("c2", 1), ("c3", 1), ("c4", 1)]

    # Partitions and clustering together are refused as the project loads, in one line.
    code = tmp_path / "flows/orders.py"
    code.write_text(
        SETTINGS_PY.replace(
            'cluster_by=["customer"])\ndef orders',
            'cluster_by=["customer"], partition_cols=["customer"])\ndef orders',
        ),
        encoding="utf-8",
    )
    with pytest.raises(UserError, match="'orders' sets both partition_cols and cluster_by"):
        load_project(tmp_path / "spark-pipeline.yml", spark=spark)


REJECTING_PY = """\
from pyspark import pipelines as dp


@dp.table
@dp.expect_or_quarantine("known_customer", "customer IS NOT NULL")
def orders():
    schema = "order_id string, customer string, amount double"
    return spark.readStream.schema(schema).json(spark.conf.get("orders.input"))


@dp.table
def refunds():  # a row malformed in a column the flow leaves out is malformed still
    reader = spark.readStream.format("csv").option("header", "true")
    schema = "refund_id string, amount double"
    return reader.schema(schema).load(spark.conf.get("refunds.input")).select("refund_id")


@dp.table
def dropping():  # the user's own choice of mode stands
    schema = "order_id string, customer string, amount double"
    reader = spark.readStream.schema(schema).option("mode", "DROPMALFORMED")
    return reader.json(spark.conf.get("orders.input")).select("order_id")
"""


def test_records_a_streaming_table_s_own_read_rejects_go_to_its_quarantine(
    spark: SparkSession, tmp_path: Path
) -> None:
    orders = ORDERS.splitlines(keepends=True)
    orders_project(
        tmp_path, "rejecting", "".join([*orders[:2], "{not json\n"]), {"r.py": REJECTING_PY}
    )
    (tmp_path / "refunds").mkdir()
    (tmp_path / "refunds/1.csv").write_text("refund_id,amount\nr1,5\nr2,lots\n", encoding="utf-8")
    spec = tmp_path / "spark-pipeline.yml"
    spec.write_text(
        spec.read_text(encoding="utf-8").replace(
            "configuration: {", f"configuration: {{refunds.input: {tmp_path}/refunds, "
        ),
        encoding="utf-8",
    )
    report = catch_up(spark, tmp_path)
    tables = tmp_path / "storage/tables"

    def rows(name: str) -> list[dict[str, Any]]:
        return DeltaTable(str(tables / name)).to_pyarrow_table().to_pylist()

    assert [row["order_id"] for row in rows("orders")] == ["a"]
    held = sorted(rows("orders_quarantine"), key=lambda row: row["reason"])
    assert [(row["reason"], row["source_file"] or "") for row in held] == [
        ("expectation known_customer failed", ""),
        ("malformed JSON line", f"file:{tmp_path}/input/1.json"),
    ]
    assert held[1]["raw"] == "{not json"
    assert rows("refunds") == [{"refund_id": "r1"}]
    (refused,) = rows("refunds_quarantine")
    assert (refused["reason"], refused["raw"]) == ("malformed CSV row", "r2,lots")
    assert sorted(row["order_id"] for row in rows("dropping")) == ["a", "b"]
    assert not (tables / "dropping_quarantine").exists()
    queries = {query.name: query for query in report.queries}
    # 3 read = 1 written + 2 quarantined (1 malformed, 1 failing its expectation)
    main, quarantine = queries["rejecting.orders"], queries["rejecting.orders.quarantine"]
    assert (main.input_rows, main.output_rows, quarantine.output_rows) == (3, 1, 2)
