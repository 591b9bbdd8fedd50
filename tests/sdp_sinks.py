"""An SDP project's file with sinks (a Delta path and a Kafka topic, SDP's
``dp.create_sink``) and a once flow (Lakeflow's ``append_flow(once=True)``) beside a
streaming append flow into one table; its configuration names the inputs, the archive's
path, the broker and the topic."""

SINKS_PY = """\
from pyspark import pipelines as dp
from pyspark.sql import functions as F


@dp.table
def orders():
    return spark.readStream.schema("order_id string, amount double").json(
        spark.conf.get("orders.input")
    )


dp.create_sink("archive", "delta", {"path": spark.conf.get("archive.path")})
dp.create_sink(
    "alerts",
    "kafka",
    {
        "kafka.bootstrap.servers": spark.conf.get("alerts.servers"),
        "topic": spark.conf.get("alerts.topic"),
    },
)


@dp.append_flow(target="archive")
def archived():
    return spark.readStream.table("orders").select("order_id", "amount")


@dp.append_flow(target="alerts")
def big_orders():
    big = spark.readStream.table("orders").where("amount > 10")
    value = F.to_json(F.struct("order_id", "amount"))
    return big.select(F.col("order_id").alias("key"), value.alias("value"))


dp.create_streaming_table("all_orders")


@dp.append_flow(target="all_orders")
def new_orders():
    return spark.readStream.table("orders")


@dp.append_flow(target="all_orders", once=True)
def old_orders():
    return spark.read.schema("order_id string, amount double").json(
        spark.conf.get("history.input")
    )
"""
