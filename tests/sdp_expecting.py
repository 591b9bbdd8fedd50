"""An SDP project's table with Lakeflow's expectation decorators stacked on it (warn,
drop, and streamsmith's quarantine), and the orders it reads: one passes, one only
warns, one is dropped and two are quarantined."""

from __future__ import annotations

# The decorators, and the table they check reading the orders (its name and @dp.table's
# arguments given), as a project's file has them.
CHECKED_TABLE = """\
@dp.table{arguments}
@dp.expect("small", "amount < 1000")
@dp.expect_or_drop("has_id", "order_id IS NOT NULL")
@dp.expect_all_or_quarantine({{"known_customer": "customer IS NOT NULL", "positive": "amount > 0"}})
def {name}():
    return spark.readStream.schema("order_id string, customer string, amount double").json(
        spark.conf.get("orders.input")
    )
"""
EXPECTING_PY = "from pyspark import pipelines as dp\n\n\n" + CHECKED_TABLE.format(
    arguments="", name="checked"
)

ORDERS = (
    '{"order_id": "a", "customer": "c1", "amount": 5}\n'
    '{"order_id": "b", "amount": 7}\n'
    '{"order_id": "c", "customer": "c2", "amount": 5000}\n'
    '{"customer": "c3", "amount": 3}\n'
    '{"order_id": "d", "customer": "c4", "amount": -1}\n'
)
