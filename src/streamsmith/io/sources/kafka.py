"""Kafka topics: through Spark's JVM connector when it is on the classpath, else
streamsmith's Python connector (``streamsmith.io.kafka.source``), with lineage: the
topic and partition, the offset, the raw value."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from streamsmith.config import ConfValue, SourceSpec, masked_options
from streamsmith.io.avro_values import raw_bytes
from streamsmith.io.kafka.login import jvm_login
from streamsmith.io.kafka.options import SOURCE_NAME
from streamsmith.io.sources.base import Source, SourceKind
from streamsmith.io.value_formats import decode_values
from streamsmith.spark import jvm
from streamsmith.transforms.quarantine import POSITION, RAW, READ_ERROR, SOURCE_FILE, SOURCE_MS

if TYPE_CHECKING:
    from streamsmith.io.schema_store import InputSample

log = logging.getLogger(__name__)

JVM_KAFKA_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
# Records of aborted (and still open) transactions are never read: librdkafka's default,
# and so streamsmith's connector's; Spark's connector would read them by default.
READ_COMMITTED = "read_committed"

_SUBSCRIPTIONS = ("subscribe", "subscribepattern", "assign")


class KafkaSource(Source):
    """Subscribed topics; offsets are kept in the checkpoint, so a replay reads the same
    records."""

    formats: ClassVar[tuple[str, ...]] = ("kafka",)
    lineage: ClassVar[SourceKind | None] = "kafka"

    def read(self, spark: SparkSession, schema: StructType | None, *, streaming: bool) -> DataFrame:
        return read_kafka(spark, self.spec, streaming=streaming, schema=schema)

    def describe(self) -> str:
        shown = masked_options(self.spec.options)  # never a password or JAAS config
        options = ", ".join(f"{k}={v}" for k, v in sorted(shown.items()))
        values = ""
        if self.spec.binary_values:
            framing: str = self.spec.value_wire_format
            if self.spec.value_schema_id is not None:
                framing += f", schema id {self.spec.value_schema_id}"
            kind = "Avro" if self.spec.value_format == "avro" else "Protobuf"
            message = f" {self.spec.value_message} of" if self.spec.value_message else ""
            values = f"; {kind} values by{message} {self.spec.value_schema} ({framing})"
        return f"kafka (connector {self.spec.connector}; {options}{values})"

    def identity(self) -> str:
        options = self.spec.options.items()
        return ";".join(f"{k}={v}" for k, v in options if k.lower() in _SUBSCRIPTIONS)


SOURCE = KafkaSource


def kafka_format(spark: SparkSession, spec: SourceSpec) -> str:
    """``kafka`` (Spark's JVM connector) or ``streamsmith_kafka``, as ``connector`` says.

    ``auto`` takes the JVM connector when its classes are on the classpath and the
    options need nothing only streamsmith's connector has (JSON at the source).
    """
    python_only = any(key.lower() in ("valueformat", "valueschema") for key in spec.options)
    if spec.connector == "python" or (spec.connector == "auto" and python_only):
        return SOURCE_NAME
    if spec.connector == "jvm" or jvm_kafka_available(spark):
        return "kafka"
    return SOURCE_NAME


def jvm_kafka_available(spark: SparkSession) -> bool:
    """Whether Spark's own Kafka connector (spark-sql-kafka) is on the classpath."""
    return jvm.class_available(spark, JVM_KAFKA_PROVIDER)


# Large Kafka batches are cut into about this many tasks per core (Spark's minPartitions),
# never into pieces under SPREAD_MIN_RECORDS records: one task per topic-partition left a
# core idle for a third of each batch on a 3-partition topic on 2 cores. Small always-on
# batches go the other way: partitions with fewer records are read together, in tasks of
# about SPREAD_MIN_RECORDS records, at most one per core
# (``streamsmith.io.kafka.offsets.plan_tasks``).
SPREAD_TASKS_PER_CORE = 4
SPREAD_MIN_RECORDS = 25_000


def _python_only(option: str) -> bool:
    key = option.lower()
    return key.startswith("rangecache") or key in ("minrecordsperpartition", "maxpackedtasks")


def read_kafka(
    spark: SparkSession, spec: SourceSpec, *, streaming: bool, schema: StructType | None = None
) -> DataFrame:
    """Kafka records plus lineage: ``kafka://topic/partition``, the offset, the raw value.

    With ``valueFormat=json`` the values are decoded at the source (streamsmith's
    connector) with the flow's record ``schema`` unless ``valueSchema`` says otherwise,
    and the decoded fields are added as top-level columns beside the ``json`` struct,
    as a file source gives them (unless one is named like a Kafka column): the
    transforms then skip their own ``from_json``. A value that did not decode keeps null
    fields and its error in the read-error column, so it goes to quarantine.
    """
    options = dict(spec.options)
    keys = {key.lower(): key for key in options}
    decoded = str(options.get(keys.get("valueformat", ""), "raw")).lower() == "json"
    if decoded and "valueschema" not in keys and schema is not None:
        options["valueSchema"] = schema.toDDL()
    fmt = kafka_format(spark, spec)
    if fmt == SOURCE_NAME:
        from streamsmith.io.kafka.source import register_kafka_source  # PyArrow: on use

        register_kafka_source(spark)
        if "minpartitions" not in keys:  # balanced tasks for large batches; see below
            options["minPartitions"] = SPREAD_TASKS_PER_CORE * spark.sparkContext.defaultParallelism
            options.setdefault("minRecordsPerPartition", SPREAD_MIN_RECORDS)
            options.setdefault("maxPackedTasks", spark.sparkContext.defaultParallelism)
    else:  # options streamsmith's runtime sets for its own connector only
        options = {k: v for k, v in options.items() if not _python_only(k)}
        if "kafka.isolation.level" not in keys:  # as librdkafka, whichever path reads
            options["kafka.isolation.level"] = READ_COMMITTED
        options.update(jvm_login({k: str(v) for k, v in options.items()}))
    reader = (spark.readStream if streaming else spark.read).format(fmt)
    for key, value in options.items():
        reader = reader.option(key, str(value).lower() if isinstance(value, bool) else str(value))
    frame = reader.load()
    if "columns" in keys:
        frame = _whole_shape(frame, options, decoded=decoded)
    error = F.col("json_error") if "json_error" in frame.columns else F.lit(None).cast("string")
    with_lineage = frame.select(
        "*",
        F.concat(F.lit("kafka://"), "topic", F.lit("/"), F.col("partition").cast("string")).alias(
            SOURCE_FILE
        ),
        F.col("offset").cast("string").alias(POSITION),
        (raw_bytes(F.col("value")) if spec.binary_values else F.col("value").cast("string")).alias(
            RAW
        ),
        error.alias(READ_ERROR),
        F.unix_millis(F.col("timestamp")).alias(SOURCE_MS),
    )
    if spec.binary_values:
        return decode_values(with_lineage, spec)
    if "json" not in frame.columns:
        return with_lineage
    fields = frame.schema["json"].dataType.fields  # type: ignore[attr-defined]
    if {field.name for field in fields} & set(with_lineage.columns):
        # A field named like a Kafka column: transforms use json.<field>.
        return with_lineage.drop(_READ_JSON)
    flat = [_decoded_field(frame, field) for field in fields]
    return with_lineage.select("*", *flat).drop(_READ_JSON)


# A pruned read's own ``json`` struct, beside the whole-shaped one, while fields are
# taken from it: taken from the rebuilt struct, Spark would build that for every row.
_READ_JSON = "_streamsmith_json_read"


def _decoded_field(frame: DataFrame, field: StructField) -> Column:
    """A field of the decoded value as a top-level column (a typed null if a pruned
    read left it out)."""
    if _READ_JSON not in frame.columns:
        return F.col("json")[field.name].alias(field.name)
    kept = set(frame.schema[_READ_JSON].dataType.fieldNames())  # type: ignore[attr-defined]
    return _or_null(field, kept, F.col(_READ_JSON)[field.name])


def _whole_shape(frame: DataFrame, options: Mapping[str, ConfValue], *, decoded: bool) -> DataFrame:
    """A pruned read (option ``columns``) in the shape of a whole one: the columns it
    does not yield are nulls of their type, so the flow's code sees the frame it always
    does (the runtime prunes only what no query reads)."""
    from streamsmith.io.kafka.source import KAFKA_SCHEMA_WITH_HEADERS  # PyArrow: on use
    from streamsmith.schemas.ddl import parse_schema

    keys = {key.lower(): key for key in options}
    headers = str(options.get(keys.get("includeheaders", ""), "false")).lower() == "true"
    present = set(frame.columns)
    kafka = [f for f in KAFKA_SCHEMA_WITH_HEADERS.fields if headers or f.name != "headers"]
    columns = [_or_null(field, present) for field in kafka]
    if decoded:
        whole = parse_schema(str(options[keys["valueschema"]]))
        kept = set(frame.schema["json"].dataType.fieldNames())  # type: ignore[attr-defined]
        fields = [_or_null(field, kept, F.col("json")[field.name]) for field in whole.fields]
        value = F.when(F.col("json").isNotNull(), F.struct(*fields))
        columns += [value.alias("json"), F.col("json_error"), F.col("json").alias(_READ_JSON)]
    return frame.select(*columns)


def _or_null(field: StructField, present: set[str], column: Column | None = None) -> Column:
    """``field``'s column (``column``, else by name) if ``present``, else a typed null."""
    if field.name not in present:
        return F.lit(None).cast(field.dataType).alias(field.name)
    return (F.col(field.name) if column is None else column).alias(field.name)


def kafka_sample(options: Mapping[str, ConfValue], limit: int) -> InputSample:
    """The first ``limit`` values of the topics a Kafka source's ``options`` subscribe
    to, as records for ``schema: infer``."""
    from streamsmith.io.kafka.client import sample_values
    from streamsmith.io.kafka.source import parse_options
    from streamsmith.io.schema_store import value_sample

    parsed = parse_options({k: str(v) for k, v in options.items()}, streaming=True)
    values = sample_values(parsed.kafka_conf, parsed.subscription, limit)
    return value_sample(values, f"{parsed.subscription.describe()} on {parsed.servers}")
