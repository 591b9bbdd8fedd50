"""The Kafka connector's option tables: what each option means and its default.

The tables are the one description of the options: the source and sink check given
options against them (a misspelt option is an error, not silently ignored) and the docs'
option reference is generated from them (``docs/gen_reference.py``). Names follow
Spark's Kafka integration where Spark has the option; Spark hands a Python data source
its options lower-cased, so they are matched without case.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# The name streamsmith's own Kafka data source registers under (io.kafka.source): kept
# here, apart from the connector, so naming it imports neither PyArrow nor PySpark's
# data source API.
SOURCE_NAME = "streamsmith_kafka"


@dataclass(frozen=True)
class KafkaOption:
    """One option: its name as users write it, its default (empty: none) and meaning."""

    name: str
    default: str
    meaning: str


# Options Spark itself may hand a data source along with the user's.
SPARK_OPTIONS = ("path", "checkpointLocation", "queryName")


def unknown_options(given: Iterable[str], table: Iterable[KafkaOption]) -> list[str]:
    """The given option names that are neither in ``table`` nor Spark's own, nor a
    ``kafka.*`` setting for librdkafka (compared without case)."""
    known = {option.name.lower() for option in table} | {n.lower() for n in SPARK_OPTIONS}
    return sorted(
        name
        for name in given
        if name.lower() not in known and not name.lower().startswith("kafka.")
    )


SOURCE_OPTIONS = (
    KafkaOption(
        "kafka.bootstrap.servers",
        "",
        "The brokers, `host:port[,host:port...]`; required.",
    ),
    KafkaOption(
        "subscribe",
        "",
        "Topics to read, comma-separated (one of subscribe, subscribePattern, assign).",
    ),
    KafkaOption(
        "subscribePattern",
        "",
        "A regular expression of topics to read; topics created later that match are read "
        "from their start.",
    ),
    KafkaOption(
        "assign",
        "",
        'Topic partitions to read, as JSON: `{"events": [0, 1]}`.',
    ),
    KafkaOption(
        "startingOffsets",
        "latest (streams), earliest (batch)",
        "Where a new query starts: `earliest`, `latest`, or JSON offsets per partition "
        '(`{"events": {"0": 42}}`, -2 earliest, -1 latest). A restarted query resumes from '
        "its checkpoint instead.",
    ),
    KafkaOption(
        "endingOffsets",
        "latest",
        "Where a batch read ends (batch reads only): `latest` or JSON offsets per partition.",
    ),
    KafkaOption(
        "failOnDataLoss",
        "true",
        "Fail the query, naming the partition and offsets, when records aged out before they "
        "were read; `false` skips them with a warning.",
    ),
    KafkaOption(
        "maxOffsetsPerTrigger",
        "",
        "The most records one micro-batch reads, over all partitions (in proportion to each "
        "partition's backlog).",
    ),
    KafkaOption(
        "adaptiveBatches",
        "false",
        "Size each micro-batch between adaptiveFloorOffsets and maxOffsetsPerTrigger from how "
        "the last ones went: small when caught up (latency), large when behind (throughput).",
    ),
    KafkaOption(
        "adaptiveFloorOffsets",
        "maxOffsetsPerTrigger / 64",
        "The smallest batch adaptiveBatches admits.",
    ),
    KafkaOption(
        "maxRecordsPerPartition",
        "",
        "Split a partition's range into tasks of at most this many records.",
    ),
    KafkaOption(
        "minPartitions",
        "",
        "Cut a batch into at least about this many tasks, each partition's range in "
        "proportion to its size (Spark's option).",
    ),
    KafkaOption(
        "minRecordsPerPartition",
        "0",
        "Never cut ranges into pieces under this many records; partitions with fewer records "
        "in the batch are read together, in tasks of about that many records.",
    ),
    KafkaOption(
        "maxPackedTasks",
        "",
        "At most this many tasks for the ranges minRecordsPerPartition packs together.",
    ),
    KafkaOption(
        "includeHeaders",
        "false",
        "Add a `headers` column (array of key/value structs).",
    ),
    KafkaOption(
        "pollTimeoutMs",
        "120000",
        "How long a task waits for records it knows exist before failing, naming the "
        "partition, servers and offsets (the broker is down or unreachable).",
    ),
    KafkaOption(
        "arrowBatchRows",
        "10000",
        "Rows per Arrow batch handed from a task to Spark.",
    ),
    KafkaOption(
        "valueFormat",
        "raw",
        "`json` decodes each value at the source with Arrow's JSON reader into a `json` "
        "struct column, with `json_error` for values that do not decode; `raw` leaves `value` "
        "as bytes.",
    ),
    KafkaOption(
        "valueSchema",
        "",
        "The DDL of the JSON values (`valueFormat=json`), e.g. `id STRING, n INT, at TIMESTAMP`.",
    ),
    KafkaOption(
        "columns",
        "every column",
        "The columns to hand Spark, comma-separated: Kafka columns, `json_error`, and "
        "`json.<field>` for decoded fields (the `json` struct then holds only those). Every "
        "value is still decoded whole, so a mistyped field no query reads is still a "
        "`json_error`. streamsmith's runtime sets it to what each query reads (Spark gives "
        "Python sources no column pruning, and copies every column of every row).",
    ),
    KafkaOption(
        "rangeCache",
        "",
        "Queries of a group named here read each offset range from the broker once, through a "
        "local file (set by streamsmith in catch-up runs; `off` disables it).",
    ),
    KafkaOption(
        "rangeCacheReaders",
        "",
        "How many queries of the rangeCache group read each range (the last one deletes the file).",
    ),
    KafkaOption(
        "rangeCacheCounted",
        "true",
        "`false`: this query reads shared ranges without being counted as one of their "
        "readers (a side query that may skip batches).",
    ),
    KafkaOption(
        "rangeCacheDir",
        "~/.cache/streamsmith/kafka-ranges",
        "Where shared ranges are kept while their readers read them (default: in "
        "streamsmith's per-user cache, `$STREAMSMITH_CACHE` or `$XDG_CACHE_HOME/streamsmith`).",
    ),
    KafkaOption(
        "rangeCacheTtlSeconds",
        "120",
        "Shared range files unused for this long are removed.",
    ),
)

SINK_OPTIONS = (
    KafkaOption(
        "kafka.bootstrap.servers",
        "",
        "The brokers, `host:port[,host:port...]`; required.",
    ),
    KafkaOption(
        "topic",
        "",
        "The topic to write to, unless the frame has a `topic` column.",
    ),
    KafkaOption(
        "flushTimeoutMs",
        "120000",
        "How long a task waits for its records' acknowledgements before failing the batch.",
    ),
)
