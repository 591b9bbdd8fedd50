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

import bisect
import dataclasses
import json
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.pandas.types import to_arrow_type
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

from streamsmith.io.admission import AdaptiveLimit
from streamsmith.io.kafka.client import (
    BrokerMetadata,
    KafkaSourceError,
    Subscription,
    consumer_config,
)
from streamsmith.io.kafka.columns import Columns, ColumnsError, parse_columns, pruned_batch
from streamsmith.io.kafka.json_values import decode_json_values, unsupported_fields
from streamsmith.io.kafka.offsets import (
    OffsetRange,
    Offsets,
    OffsetSpecError,
    TopicPartition,
    cap_by_rows,
    from_json_dict,
    parse_offset_spec,
    plan_tasks,
    resolve,
    split_ranges,
    to_json_dict,
)
from streamsmith.io.kafka.options import SOURCE_NAME, SOURCE_OPTIONS, unknown_options
from streamsmith.io.kafka.range_cache import (
    DEFAULT_TTL_S,
    RANGE_CACHE_COUNTED,
    RangeCache,
    default_dir,
)
from streamsmith.io.kafka.sink import KafkaBatchWriter, KafkaStreamWriter, parse_sink_options
from streamsmith.schemas.ddl import DDLError, parse_schema

log = logging.getLogger(__name__)


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
_ARROW_TYPES = dict(_ARROW_FIELDS)


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
    adaptive_floor: int | None = None  # adaptive batch sizing between this and the cap
    max_records_per_partition: int | None = None
    min_partitions: int | None = None  # Spark's minPartitions: at least this many tasks
    min_records_per_partition: int = 0  # but no task smaller than this
    max_packed_tasks: int | None = None  # ranges under that floor: at most this many tasks
    include_headers: bool = False
    poll_timeout_s: float = 120.0
    batch_rows: int = 10_000
    value_schema: str | None = None
    json_type: pa.StructType | None = None
    columns: Columns | None = None  # a pruned read: what it yields (None: everything)
    range_cache: RangeCache | None = None  # streams only: ranges shared by a flow's queries

    @property
    def servers(self) -> str:
        return self.kafka_conf["bootstrap.servers"]


def parse_options(options: Mapping[str, str], *, streaming: bool) -> KafkaSourceOptions:
    """Validate the (lower-cased) options Spark hands a Python data source."""
    opts = {key.lower(): str(value) for key, value in options.items()}
    unknown = unknown_options(opts, SOURCE_OPTIONS)
    if unknown:
        raise KafkaOptionError(
            f"unknown Kafka source option(s) {', '.join(unknown)}: see the option reference "
            "(librdkafka settings go under kafka.*)"
        )
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
    max_offsets = _positive(opts, "maxoffsetspertrigger")
    return KafkaSourceOptions(
        kafka_conf=kafka_conf,
        subscription=subscription,
        starting_offsets=starting,
        ending_offsets=ending,
        fail_on_data_loss=_boolean(opts, "failondataloss", True),
        max_offsets_per_trigger=max_offsets,
        adaptive_floor=_adaptive_floor(opts, max_offsets),
        max_records_per_partition=_positive(opts, "maxrecordsperpartition"),
        min_partitions=_positive(opts, "minpartitions"),
        min_records_per_partition=_positive(opts, "minrecordsperpartition") or 0,
        max_packed_tasks=_positive(opts, "maxpackedtasks"),
        include_headers=_boolean(opts, "includeheaders", False),
        poll_timeout_s=(_positive(opts, "polltimeoutms") or 120_000) / 1000,
        batch_rows=_positive(opts, "arrowbatchrows") or 10_000,
        value_schema=_value_schema(opts),
        columns=_columns(opts),
        range_cache=_range_cache(opts) if streaming else None,
    )


_ADAPTIVE = "adaptiveBatches".lower()
_ADAPTIVE_FLOOR = "adaptiveFloorOffsets".lower()


def _adaptive_floor(opts: Mapping[str, str], cap: int | None) -> int | None:
    """``adaptiveBatches=true``: batches between ``adaptiveFloorOffsets`` (default 1/64 of
    the cap) and ``maxOffsetsPerTrigger``, the cap (see ``streamsmith.io.admission``)."""
    if not _boolean(opts, _ADAPTIVE, False):
        if _ADAPTIVE_FLOOR in opts:
            raise KafkaOptionError("option adaptiveFloorOffsets needs adaptiveBatches=true")
        return None
    if cap is None:
        raise KafkaOptionError(
            "adaptiveBatches=true needs maxOffsetsPerTrigger, the largest batch to admit"
        )
    floor = _positive(opts, _ADAPTIVE_FLOOR) or max(1, cap // 64)
    if floor > cap:
        raise KafkaOptionError(
            f"option adaptiveFloorOffsets ({floor}) must not exceed maxOffsetsPerTrigger ({cap})"
        )
    return floor


def _range_cache(opts: Mapping[str, str]) -> RangeCache | None:
    """``rangeCache=GROUP`` with ``rangeCacheReaders=N``: the N queries of a group read
    each offset range from the broker once (see ``streamsmith.io.kafka.range_cache``)."""
    group = opts.get("rangecache", "").strip()
    readers = _positive(opts, "rangecachereaders")
    if not group or group.lower() in ("off", "false"):
        return None
    if readers is None:
        raise KafkaOptionError(
            "option rangeCache needs rangeCacheReaders, how many queries read each range"
        )
    if readers < 2:
        return None
    ttl = _positive(opts, "rangecachettlseconds") or DEFAULT_TTL_S
    folder = Path(opts["rangecachedir"]) if "rangecachedir" in opts else default_dir()
    counted = _boolean(opts, RANGE_CACHE_COUNTED.lower(), True)
    return RangeCache(group, readers, folder=folder, ttl_s=float(ttl), counted=counted)


def _value_schema(opts: Mapping[str, str]) -> str | None:
    """The DDL of JSON values to decode at the source (``valueFormat=json``), if any."""
    value_format = opts.get("valueformat", "raw").strip().lower()
    if value_format not in ("raw", "json"):
        raise KafkaOptionError(f"option valueFormat must be raw or json, not {value_format!r}")
    if value_format == "raw":
        if "valueschema" in opts:
            raise KafkaOptionError("option valueSchema needs valueFormat=json")
        return None
    ddl = opts.get("valueschema", "").strip()
    if not ddl:
        raise KafkaOptionError(
            "valueFormat=json needs valueSchema, the DDL of the values, e.g. 'id STRING, n INT'"
        )
    return ddl


def _columns(opts: Mapping[str, str]) -> Columns | None:
    """The columns a pruned read yields (``columns``; see ``streamsmith.io.kafka.columns``)."""
    if "columns" not in opts:
        return None
    value_schema = _value_schema(opts)
    fields = None if value_schema is None else _value_struct(value_schema).fieldNames()
    try:
        return parse_columns(
            opts["columns"], fields, headers=_boolean(opts, "includeheaders", False)
        )
    except ColumnsError as exc:
        raise KafkaOptionError(str(exc)) from None


def _value_struct(ddl: str) -> StructType:
    """``valueSchema`` parsed here, for a pruned read (Spark parses it otherwise)."""
    try:
        return parse_schema(ddl)
    except DDLError as exc:
        raise KafkaOptionError(f"option columns needs a valueSchema read here: {exc}") from None


def source_schema(options: Mapping[str, str]) -> StructType | str:
    """The output schema: Spark's Kafka columns, plus ``json`` and ``json_error`` when
    values are decoded at the source (a DDL string, since Spark parses it); with
    ``columns``, only those."""
    opts = {key.lower(): str(value) for key, value in options.items()}
    include = opts.get("includeheaders", "false").lower() == "true"
    base = KAFKA_SCHEMA_WITH_HEADERS if include else KAFKA_SCHEMA
    value_schema = _value_schema(opts)
    columns = _columns(opts)
    if columns is not None:
        kept = [field for field in base.fields if field.name in columns.kafka]
        if value_schema is None or columns.fields is None:
            return StructType(kept)
        decoded = _value_struct(value_schema)
        pruned = StructType([decoded[name] for name in columns.fields])
        extra = [StructField("json", pruned), StructField("json_error", StringType())]
        return StructType([*kept, *extra])
    if value_schema is None:
        return base
    kafka = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in base.fields)
    return f"{kafka}, json struct<{value_schema}>, json_error string"


def with_json_type(options: KafkaSourceOptions, schema: StructType) -> KafkaSourceOptions:
    """Attach the Arrow type of the resolved ``json`` column (Spark has parsed the DDL)."""
    if options.value_schema is None:
        return options
    # A pruned read decodes every field still (a mistyped one is an error), so the whole
    # value schema, not the pruned ``json`` column Spark was told of.
    whole = _value_struct(options.value_schema) if options.columns else schema["json"].dataType
    arrow = to_arrow_type(whole, timezone="UTC")
    unsupported = unsupported_fields(arrow)
    if unsupported:
        raise KafkaOptionError(
            f"valueSchema fields {', '.join(unsupported)} are maps, which JSON at the source "
            "cannot decode: declare them as STRUCT or STRING, or use from_json"
        )
    return dataclasses.replace(options, json_type=arrow)


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
    """A Spark task's share of a batch: topic-partition ranges, read in this order."""

    ranges: tuple[OffsetRange, ...]


def read_range(options: KafkaSourceOptions, offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Consume ``[start, end)`` of one partition as Arrow record batches."""
    if offset_range.size <= 0:
        return
    consumer = Consumer(consumer_config(options.kafka_conf))
    try:
        for messages in _records_in_range(consumer, options, offset_range):
            yield to_record_batch(messages, offset_range, options)
    finally:
        consumer.close()


def _records_in_range(
    consumer: Consumer, options: KafkaSourceOptions, offset_range: OffsetRange
) -> Iterator[list[Any]]:
    """The records of ``[start, end)`` in offset order, in lists of up to ``batch_rows``.

    Ends when the consumer's position reaches ``end``, which also covers offsets that
    hold no record (compacted topics, transaction markers). Fails naming the partition
    and offsets if the range's first records are gone (unless ``failOnDataLoss=false``)
    or the broker stops answering for ``pollTimeoutMs``. Work is done per list, not per
    record: the per-record Python cost is what bounds this source's throughput.
    """
    where = f"{offset_range.topic}-{offset_range.partition}"
    tp = KafkaTopicPartition(offset_range.topic, offset_range.partition, offset_range.start)
    consumer.assign([tp])
    position = offset_range.start
    last_progress = time.monotonic()
    while position < offset_range.end:
        wanted = min(options.batch_rows, offset_range.end - position)
        messages = consumer.consume(num_messages=wanted, timeout=1.0)
        records = messages
        errors = list(map(Message.error, messages))
        if errors.count(None) != len(errors):
            records = [m for m, e in zip(messages, errors, strict=True) if e is None]
            _raise_on_errors(messages, where, position, options.servers)
        if records:
            first, last = int(records[0].offset() or 0), int(records[-1].offset() or 0)
            if last >= offset_range.end:  # offsets rise within a partition
                offsets: list[int] = list(map(Message.offset, records))  # type: ignore[arg-type]
                records = records[: bisect.bisect_left(offsets, offset_range.end)]
            if first > position == offset_range.start:
                _report_gap(options, f"{where}: offsets {position}..{first - 1}")
            if records:
                yield records
            position = min(last + 1, offset_range.end)
        if messages:
            last_progress = time.monotonic()
            position = max(position, consumer.position([tp])[0].offset or position)
        elif time.monotonic() - last_progress > options.poll_timeout_s:
            raise KafkaSourceError(
                f"no records from {where} on {options.servers} for "
                f"{options.poll_timeout_s:.0f}s while reading offsets "
                f"{position}..{offset_range.end - 1}; is the broker up?"
            )


def _raise_on_errors(messages: list[Any], where: str, position: int, servers: str) -> None:
    """Fail on any consumer error other than reaching the partition's end."""
    for message in messages:
        error = message.error()
        if error is not None and error.code() != KafkaError._PARTITION_EOF:
            raise KafkaSourceError(
                f"reading {where} at offset {position} from {servers}: {error.str()}"
            )


def _report_gap(options: KafkaSourceOptions, gone: str) -> None:
    if options.fail_on_data_loss:
        raise KafkaSourceError(
            f"{gone} are gone from the broker (retention or compaction) before they were "
            "read; set failOnDataLoss=false to skip them"
        )
    log.warning("%s are gone from the broker; skipped (failOnDataLoss=false)", gone)


def to_record_batch(
    records: list[Any], offset_range: OffsetRange, options: KafkaSourceOptions
) -> pa.RecordBatch:
    """Consumed records of one partition as an Arrow batch in the source's schema.

    Per-record work is only C calls mapped over the list (the accessors of
    confluent-kafka's ``Message``); the rest is Arrow compute on whole columns. This was
    3 times faster than building Python lists of converted values.
    """
    count = len(records)
    stamps = list(map(Message.timestamp, records))  # (librdkafka type, epoch ms)
    millis = pa.array([ms for _, ms in stamps], pa.int64())
    micros = pc.multiply(millis, 1000).cast(_ARROW_TYPES["timestamp"])
    timestamps = pc.if_else(pc.less(millis, 0), pa.scalar(None, micros.type), micros)
    # librdkafka: 1 create time, 2 log-append time; Spark/Kafka: 0 and 1.
    kinds = {kind for kind, _ in stamps}
    if len(kinds) == 1:
        (kind,) = kinds
        timestamp_types = pa.repeat(pa.scalar(kind - 1 if kind > 0 else None, pa.int32()), count)
    else:
        timestamp_types = pa.array([k - 1 if k > 0 else None for k, _ in stamps], pa.int32())
    values = list(map(Message.value, records))
    value_array = pa.array(values, pa.binary())
    arrays = [
        pa.array(list(map(Message.key, records)), pa.binary()),
        value_array,
        pa.repeat(pa.scalar(offset_range.topic, pa.string()), count),
        pa.repeat(pa.scalar(offset_range.partition, pa.int32()), count),
        pa.array(list(map(Message.offset, records)), pa.int64()),
        timestamps,
        timestamp_types,
    ]
    names = [name for name, _ in _ARROW_FIELDS]
    if options.include_headers:
        headers = [[{"key": k, "value": v} for k, v in (m.headers() or [])] for m in records]
        arrays.append(pa.array(headers, type=_ARROW_HEADERS))
        names.append("headers")
    if options.json_type is not None:
        parsed, errors = decode_json_values(values, options.json_type, value_array)
        arrays.extend([parsed, errors])
        names.extend(["json", "json_error"])
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _yielded(
    options: KafkaSourceOptions, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """``batches`` cut to the read's ``columns``: after the range cache, which keeps whole
    batches for every query of the group, whatever each reads."""
    if options.columns is None:
        return batches
    columns = options.columns
    return (pruned_batch(batch, columns) for batch in batches)


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
        ranges = split_ranges(begin, end, self.options.max_records_per_partition)
        tasks = plan_tasks(
            [r for r in ranges if r.size > 0],
            self.options.min_partitions,
            self.options.min_records_per_partition,
            self.options.max_packed_tasks,
        )
        return [RangePartition(task) for task in tasks]

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
        cap, floor = options.max_offsets_per_trigger, options.adaptive_floor
        self.adaptive = AdaptiveLimit(floor, cap) if floor and cap else None

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
            rows = limit.max_rows
            if self.adaptive is not None:
                backlog = sum(end[tp] - floor.get(tp, end[tp]) for tp in end)
                rows = max(1, self.adaptive.admit(backlog))
            end = cap_by_rows(floor, end, rows)
        if self.options.range_cache is None:
            return to_json_dict(end)
        return self.options.range_cache.agreed_end(to_json_dict(begin), to_json_dict(end))

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return to_json_dict(self._latest) if self._latest else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[RangePartition]:
        return self.planner.ranges(from_json_dict(start), from_json_dict(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        for offset_range in partition.ranges:
            yield from _yielded(self.options, self._read_range(offset_range))

    def _read_range(self, offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
        cache = self.options.range_cache
        if cache is None or offset_range.size <= 0:
            return read_range(self.options, offset_range)
        return cache.read(
            _range_key(self.options, offset_range),
            lambda: read_range(self.options, offset_range),
        )

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, not in the broker."""

    def stop(self) -> None:
        self.planner.close()


def _range_key(options: KafkaSourceOptions, offset_range: OffsetRange) -> dict[str, object]:
    """Everything that decides the batches read for ``offset_range``."""
    return {
        "kafka": dict(options.kafka_conf),
        "range": dataclasses.astuple(offset_range),
        "headers": options.include_headers,
        "values": options.value_schema,
        "rows": options.batch_rows,
        "gaps": options.fail_on_data_loss,
    }


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
        for offset_range in partition.ranges:
            yield from _yielded(self.options, read_range(self.options, offset_range))


class KafkaDataSource(DataSource):
    """``format("streamsmith_kafka")``: Spark's Kafka source and sink options, in Python."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType | str:
        return source_schema(self.options)

    def streamReader(self, schema: StructType) -> KafkaStreamReader:
        return KafkaStreamReader(
            with_json_type(parse_options(self.options, streaming=True), schema)
        )

    def reader(self, schema: StructType) -> KafkaBatchReader:
        return KafkaBatchReader(
            with_json_type(parse_options(self.options, streaming=False), schema)
        )

    def writer(self, schema: StructType, overwrite: bool) -> KafkaBatchWriter:
        return KafkaBatchWriter(parse_sink_options(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> KafkaStreamWriter:
        return KafkaStreamWriter(parse_sink_options(self.options, schema))


_REGISTERED: set[int] = set()


def register_kafka_source(spark: SparkSession) -> None:
    """Make ``format("streamsmith_kafka")`` available in ``spark`` (once per session)."""
    key = id(spark)
    if key not in _REGISTERED:
        spark.dataSource.register(KafkaDataSource)
        _REGISTERED.add(key)
