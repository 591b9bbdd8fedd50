"""What decoding Protobuf values in Python costs, beside Avro decoded by Spark.

Protobuf values are decoded with the protobuf runtime in ``mapInArrow`` (spark-protobuf is
not served here), Avro values by spark-avro's ``from_avro`` in the JVM. This script
decodes ``--records`` values of the same five-field click (string, int, long, string,
double) both ways, from a cached frame of Kafka-like records into the ``noop`` sink, and
prints the median seconds of ``--runs`` and records per second.

    .venv/bin/python benchmarks/protobuf_decode.py --records 200000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from google.protobuf import descriptor_pb2
from google.protobuf.message_factory import GetMessageClass
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import to_avro

from streamsmith.config import SparkSpec
from streamsmith.io.avro_values import decode_avro_values, load_value_schema
from streamsmith.io.protobuf_values import decode_protobuf_values, load_protobuf_schema
from streamsmith.schemas.protobuf import find_message
from streamsmith.spark.session import build_session
from streamsmith.transforms.quarantine import READ_ERROR

_T = descriptor_pb2.FieldDescriptorProto
FIELDS = [("user", _T.TYPE_STRING), ("ms", _T.TYPE_INT32), ("ts", _T.TYPE_INT64),
          ("page", _T.TYPE_STRING), ("amount", _T.TYPE_DOUBLE)]  # fmt: skip
AVRO = {"type": "record", "name": "Click", "fields": [
    {"name": "user", "type": "string"}, {"name": "ms", "type": "int"},
    {"name": "ts", "type": "long"}, {"name": "page", "type": "string"},
    {"name": "amount", "type": "double"}]}  # fmt: skip


def descriptor_set() -> bytes:
    files = descriptor_pb2.FileDescriptorSet()
    proto = files.file.add(name="bench/click.proto", package="bench", syntax="proto3")
    click = proto.message_type.add(name="Click")
    for number, (name, kind) in enumerate(FIELDS, start=1):
        click.field.add(name=name, number=number, type=kind, label=_T.LABEL_OPTIONAL)
    return files.SerializeToString()


def timed(frame: DataFrame, runs: int) -> float:
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        frame.write.format("noop").mode("overwrite").save()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    spark = build_session(SparkSpec(), "protobuf-decode")
    folder = Path(tempfile.mkdtemp())
    (folder / "click.desc").write_bytes(descriptor_set())
    (folder / "click.avsc").write_text(json.dumps(AVRO))
    protobuf = load_protobuf_schema(folder / "click.desc", "bench.Click", "bench")
    avro = load_value_schema(folder / "click.avsc", "bench")
    Click = GetMessageClass(find_message(protobuf.data, "bench.Click"))
    rows = spark.range(args.records).select(
        F.concat(F.lit("user-"), F.col("id").cast("string")).alias("user"),
        (F.col("id") % 1000).cast("int").alias("ms"),
        (F.col("id") + 1_795_000_000_000).alias("ts"),
        F.concat(F.lit("/page/"), (F.col("id") % 50).cast("string")).alias("page"),
        (F.col("id") / 7).alias("amount"),
    )
    proto_values = [
        (Click(user=r.user, ms=r.ms, ts=r.ts, page=r.page, amount=r.amount).SerializeToString(),)
        for r in rows.collect()
    ]
    kafka = "value binary"
    frames = {
        "protobuf (Python, mapInArrow)": spark.createDataFrame(proto_values, kafka),
        "avro (spark-avro, JVM)": rows.select(
            to_avro(F.struct(*rows.columns), json.dumps(AVRO)).alias("value")
        ),
    }
    cores = spark.sparkContext.defaultParallelism
    print(f"{args.records} values, median of {args.runs} runs, {cores} cores")
    print(f"{'decoding':32}{'seconds':>10}{'records/s':>12}")
    for name, given in frames.items():
        values = (
            given.withColumn(READ_ERROR, F.lit(None).cast("string"))
            .repartition(spark.sparkContext.defaultParallelism)
            .cache()
        )
        values.count()
        if name.startswith("protobuf"):
            decoded = decode_protobuf_values(values, protobuf, confluent=False, schema_id=None)
        else:
            decoded = decode_avro_values(values, avro, confluent=False, schema_id=None)
        seconds = timed(decoded, args.runs)
        print(f"{name:32}{seconds:>10.2f}{args.records / seconds:>12,.0f}")
        values.unpersist()
    spark.stop()


if __name__ == "__main__":
    main()
