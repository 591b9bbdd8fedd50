"""streamsmith's Kafka source: a Spark Python Data Source on confluent-kafka.

Spark's own Kafka connector is a JVM package from Maven Central; where that cannot be
fetched, this source gives the same options and output schema from pure Python::

    spark.readStream.format("streamsmith_kafka")
        .option("kafka.bootstrap.servers", "127.0.0.1:9092")
        .option("subscribe", "events")
        .option("maxOffsetsPerTrigger", 100_000)
        .load()

Offsets live in the query's checkpoint (nothing is committed to the broker), so a
restarted query re-reads exactly the batch that did not commit. Each micro-batch is
planned on the driver (partitions and their end offsets, admission control) and read
by one Spark task per topic-partition range, which consumes ``[start, end)`` and returns
Arrow record batches.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from streamsmith.io.kafka.client import (
    BrokerMetadata,
    KafkaSourceError,
    Subscription,
    consumer_config,
)
from streamsmith.io.kafka.offsets import (
    OffsetRange,
    Offsets,
    OffsetSpecError,
    TopicPartition,
    cap_by_rows,
    from_json_dict,
    parse_offset_spec,
    resolve,
    split_ranges,
    to_json_dict,
)
from streamsmith.io.kafka.sink import KafkaBatchWriter, KafkaStreamWriter, parse_sink_options

log = logging.getLogger(__name__)

SOURCE_NAME = "streamsmith_kafka"

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
)
KAFKA_SCHEMA_WITH_HEADERS = StructType([*KAFKA_SCHEMA.fields, StructField("headers", HEADERS_TYPE)])

_ARROW_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_ARROW_FIELDS = [
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp", pa.timestamp("us", tz="UTC")),
    ("timestampType", pa.int32()),
]


class KafkaOptionError(ValueError):
    """A source option that is missing or malformed; the message names the option."""


@dataclass(frozen=True)
class KafkaSourceOptions:
    """The source's options, validated. Keys follow Spark's Kafka integration guide."""

    kafka_conf: Mapping[str, str]
    subscription: Subscription
    starting_offsets: str | Offsets = "latest"
    ending_offsets: str | Offsets = "latest"
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    poll_timeout_s: float = 120.0
    batch_rows: int = 10_000
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def servers(self) -> str:
        return self.kafka_conf["bootstrap.servers"]


def parse_options(options: Mapping[str, str], *, streaming: bool) -> KafkaSourceOptions:
    """Validate the (lower-cased) options Spark hands a Python data source."""
    opts = {key.lower(): str(value) for key, value in options.items()}
    kafka_conf = {
        key[len("kafka.") :]: value for key, value in opts.items() if key.startswith("kafka.")
    }
    if "bootstrap.servers" not in kafka_conf:
        raise KafkaOptionError("option kafka.bootstrap.servers is required, e.g. 127.0.0.1:9092")
    chosen = [key for key in ("subscribe", "subscribepattern", "assign") if key in opts]
    if len(chosen) != 1:
        raise KafkaOptionError(
            "set exactly one of subscribe, subscribePattern or assign"
            + (f" (got {', '.join(chosen)})" if chosen else "")
        )
    subscription = _subscription(chosen[0], opts[chosen[0]])
    try:
        starting = parse_offset_spec(
            "startingOffsets", opts.get("startingoffsets", "latest" if streaming else "earliest")
        )
        ending = parse_offset_spec("endingOffsets", opts.get("endingoffsets", "latest"))
    except OffsetSpecError as exc:
        raise KafkaOptionError(str(exc)) from None
    if streaming and "endingoffsets" in opts:
        raise KafkaOptionError(
            "endingOffsets applies to batch reads only; remove it from the stream"
        )
    return KafkaSourceOptions(
        kafka_conf=kafka_conf,
        subscription=subscription,
        starting_offsets=starting,
        ending_offsets=ending,
        fail_on_data_loss=_boolean(opts, "failondataloss", True),
        max_offsets_per_trigger=_positive(opts, "maxoffsetspertrigger"),
        max_records_per_partition=_positive(opts, "maxrecordsperpartition"),
        include_headers=_boolean(opts, "includeheaders", False),
        poll_timeout_s=(_positive(opts, "polltimeoutms") or 120_000) / 1000,
        batch_rows=_positive(opts, "arrowbatchrows") or 10_000,
    )


def _subscription(kind: str, value: str) -> Subscription:
    if kind == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise KafkaOptionError("subscribe needs a comma-separated list of topics")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribepattern":
        return Subscription("subscribePattern", pattern=value)
    try:
        document = json.loads(value)
        assignment = tuple(
            sorted((str(topic), int(p)) for topic, parts in document.items() for p in parts)
        )
    except (ValueError, TypeError, AttributeError):
        raise KafkaOptionError(f'assign={value!r} must be JSON like {{"topic": [0, 1]}}') from None
    return Subscription("assign", assignment=assignment)


def _boolean(opts: Mapping[str, str], key: str, default: bool) -> bool:
    if key not in opts:
        return default
    value = opts[key].strip().lower()
    if value not in ("true", "false"):
        raise KafkaOptionError(f"option {key} must be true or false, not {opts[key]!r}")
    return value == "true"


def _positive(opts: Mapping[str, str], key: str) -> int | None:
    if key not in opts:
        return None
    try:
        number = int(opts[key])
    except ValueError:
        raise KafkaOptionError(f"option {key} must be a whole number, not {opts[key]!r}") from None
    if number <= 0:
        raise KafkaOptionError(f"option {key} must be positive, not {number}")
    return number


# ---------------------------------------------------------------------------------------
# Reading one range on an executor


@dataclass(frozen=True)
class RangePartition(InputPartition):
    """A Spark task's share of a batch: one topic-partition range."""

    range: OffsetRange


def read_range(options: KafkaSourceOptions, offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Consume ``[start, end)`` of one partition as Arrow record batches."""
    if offset_range.size <= 0:
        return
    consumer = Consumer(consumer_config(options.kafka_conf))
    try:
        batch = _BatchBuilder(options.include_headers)
        for message in _messages_in_range(consumer, options, offset_range):
            batch.add(message)
            if len(batch) >= options.batch_rows:
                yield batch.flush()
        if len(batch):
            yield batch.flush()
    finally:
        consumer.close()


def _messages_in_range(
    consumer: Consumer, options: KafkaSourceOptions, offset_range: OffsetRange
) -> Iterator[Any]:
    """The records of ``[start, end)``, in offset order.

    Ends when the consumer's position reaches ``end``, which also covers offsets that
    hold no record (compacted topics, transaction markers). Fails naming the partition
    and offsets if the range's first records are gone (unless ``failOnDataLoss=false``)
    or the broker stops answering for ``pollTimeoutMs``.
    """
    where = f"{offset_range.topic}-{offset_range.partition}"
    tp = KafkaTopicPartition(offset_range.topic, offset_range.partition, offset_range.start)
    consumer.assign([tp])
    position = offset_range.start
    last_progress = time.monotonic()
    while position < offset_range.end:
        wanted = min(options.batch_rows, offset_range.end - position)
        messages = consumer.consume(num_messages=wanted, timeout=1.0)
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaSourceError(
                    f"reading {where} at offset {position} from {options.servers}: {error.str()}"
                )
            offset: int = message.offset()  # type: ignore[assignment]  # set on records
            if offset >= offset_range.end:
                return
            if offset > position == offset_range.start:
                _report_gap(options, f"{where}: offsets {position}..{offset - 1}")
            yield message
            position = offset + 1
        if messages:
            last_progress = time.monotonic()
            position = max(position, consumer.position([tp])[0].offset or position)
        elif time.monotonic() - last_progress > options.poll_timeout_s:
            raise KafkaSourceError(
                f"no records from {where} on {options.servers} for "
                f"{options.poll_timeout_s:.0f}s while reading offsets "
                f"{position}..{offset_range.end - 1}; is the broker up?"
            )


def _report_gap(options: KafkaSourceOptions, gone: str) -> None:
    if options.fail_on_data_loss:
        raise KafkaSourceError(
            f"{gone} are gone from the broker (retention or compaction) before they were "
            "read; set failOnDataLoss=false to skip them"
        )
    log.warning("%s are gone from the broker; skipped (failOnDataLoss=false)", gone)


class _BatchBuilder:
    """Collects consumed messages column by column and emits Arrow record batches."""

    def __init__(self, include_headers: bool) -> None:
        self.include_headers = include_headers
        self._reset()

    def _reset(self) -> None:
        self.columns: dict[str, list[Any]] = {name: [] for name, _ in _ARROW_FIELDS}
        self.headers: list[Any] = []

    def __len__(self) -> int:
        return len(self.columns["offset"])

    def add(self, message: Any) -> None:
        kind, millis = message.timestamp()
        columns = self.columns
        columns["key"].append(message.key())
        columns["value"].append(message.value())
        columns["topic"].append(message.topic())
        columns["partition"].append(message.partition())
        columns["offset"].append(message.offset())
        columns["timestamp"].append(millis * 1000 if millis >= 0 else None)
        # librdkafka: 1 create time, 2 log-append time; Spark/Kafka: 0 and 1.
        columns["timestampType"].append(kind - 1 if kind > 0 else None)
        if self.include_headers:
            self.headers.append([{"key": k, "value": v} for k, v in (message.headers() or [])])

    def flush(self) -> pa.RecordBatch:
        arrays = [pa.array(self.columns[name], type=kind) for name, kind in _ARROW_FIELDS]
        names = [name for name, _ in _ARROW_FIELDS]
        if self.include_headers:
            arrays.append(pa.array(self.headers, type=_ARROW_HEADERS))
            names.append("headers")
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, names=names)


# ---------------------------------------------------------------------------------------
# Planning on the driver


class _Planner:
    """Driver-side state shared by the stream and batch readers (not sent to executors)."""

    def __init__(self, options: KafkaSourceOptions) -> None:
        self.options = options
        self._metadata: BrokerMetadata | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_metadata"] = None  # a live consumer cannot travel to executors
        return state

    @property
    def metadata(self) -> BrokerMetadata:
        if self._metadata is None:
            self._metadata = BrokerMetadata(self.options.kafka_conf)
        return self._metadata

    def close(self) -> None:
        if self._metadata is not None:
            self._metadata.close()
            self._metadata = None

    def current_partitions(self) -> list[TopicPartition]:
        return self.metadata.partitions(self.options.subscription)

    def resolve(self, spec: str | Offsets, partitions: list[TopicPartition]) -> Offsets:
        earliest = self.metadata.earliest(partitions)
        latest = self.metadata.latest(partitions)
        return resolve(spec, partitions, earliest, latest)

    def ranges(self, start: Offsets, end: Offsets) -> list[RangePartition]:
        """Plan the tasks for ``[start, end)``; partitions new since ``start`` begin at earliest."""
        new = [tp for tp in end if tp not in start]
        begin = dict(start)
        if new:
            begin.update(self.metadata.earliest(new))
        self._check_data_loss(begin, end)
        return [
            RangePartition(r)
            for r in split_ranges(begin, end, self.options.max_records_per_partition)
            if r.size > 0
        ]

    def _check_data_loss(self, begin: Offsets, end: Offsets) -> None:
        earliest = self.metadata.earliest([tp for tp in end if end[tp] > begin.get(tp, end[tp])])
        for tp, first in earliest.items():
            if begin[tp] < first:
                lost = f"{tp[0]}-{tp[1]} offsets {begin[tp]}..{first - 1}"
                if self.options.fail_on_data_loss:
                    raise KafkaSourceError(
                        f"{lost} aged out of the broker before they were read; "
                        "set failOnDataLoss=false to skip them"
                    )
                log.warning("skipping %s: aged out of the broker before they were read", lost)
                begin[tp] = first


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch planning: offsets in the checkpoint, admission control, availableNow."""

    def __init__(self, options: KafkaSourceOptions) -> None:
        self.options = options
        self.planner = _Planner(options)
        self._target: Offsets | None = None
        self._latest: Offsets = {}

    def initialOffset(self) -> dict[str, Any]:
        partitions = self.planner.current_partitions()
        return to_json_dict(self.planner.resolve(self.options.starting_offsets, partitions))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        partitions = self.planner.current_partitions()
        self._target = self.planner.metadata.latest(partitions)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = from_json_dict(start)
        if self._target is not None:
            latest = dict(self._target)
        else:
            partitions = self.planner.current_partitions()
            latest = self.planner.metadata.latest(partitions)
        self._latest = latest
        end = {tp: max(latest.get(tp, 0), begin.get(tp, 0)) for tp in {*latest, *begin}}
        if isinstance(limit, ReadMaxRows):
            new = [tp for tp in end if tp not in begin]
            floor = {**begin, **(self.planner.metadata.earliest(new) if new else {})}
            end = cap_by_rows(floor, end, limit.max_rows)
        return to_json_dict(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return to_json_dict(self._latest) if self._latest else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[RangePartition]:
        return self.planner.ranges(from_json_dict(start), from_json_dict(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        return read_range(self.options, partition.range)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, not in the broker."""

    def stop(self) -> None:
        self.planner.close()


class KafkaBatchReader(DataSourceReader):
    """``spark.read``: one job over ``[startingOffsets, endingOffsets)``, for reports."""

    def __init__(self, options: KafkaSourceOptions) -> None:
        self.options = options
        self.planner = _Planner(options)

    def partitions(self) -> list[RangePartition]:
        try:
            partitions = self.planner.current_partitions()
            start = self.planner.resolve(self.options.starting_offsets, partitions)
            end = self.planner.resolve(self.options.ending_offsets, partitions)
            return self.planner.ranges(start, end)
        finally:
            self.planner.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        return read_range(self.options, partition.range)


class KafkaDataSource(DataSource):
    """``format("streamsmith_kafka")``: Spark's Kafka source and sink options, in Python."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        include = str(self.options.get("includeheaders", "false")).lower() == "true"
        return KAFKA_SCHEMA_WITH_HEADERS if include else KAFKA_SCHEMA

    def streamReader(self, schema: StructType) -> KafkaStreamReader:
        return KafkaStreamReader(parse_options(self.options, streaming=True))

    def reader(self, schema: StructType) -> KafkaBatchReader:
        return KafkaBatchReader(parse_options(self.options, streaming=False))

    def writer(self, schema: StructType, overwrite: bool) -> KafkaBatchWriter:
        return KafkaBatchWriter(parse_sink_options(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> KafkaStreamWriter:
        return KafkaStreamWriter(parse_sink_options(self.options, schema))


def register_kafka_source(spark: SparkSession) -> None:
    """Make ``format("streamsmith_kafka")`` available in ``spark`` (idempotent)."""
    spark.dataSource.register(KafkaDataSource)
