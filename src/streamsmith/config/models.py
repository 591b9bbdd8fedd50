"""The spec's models: frozen pydantic models that reject unknown keys, one per section
of the YAML document (sources, flows, sinks, monitoring, ...)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    model_validator,
)

from streamsmith.config.base import (
    IDENTIFIER,
    ConfValue,
    Cron,
    Duration,
    StrictModel,
    TriggerText,
)
from streamsmith.config.file_options import json_parse_options
from streamsmith.config.maintenance import (
    MaintenanceSpec,
    MaterializedViewSpec,
)
from streamsmith.config.operations import (
    MonitorSpec,
    NotifySpec,
    SupervisorSpec,
)
from streamsmith.config.origins import describe_validation_error
from streamsmith.config.origins import layer_of as key_layer
from streamsmith.config.origins import origin_of as key_origin
from streamsmith.defaults import (
    DEFAULT_STORAGE_ROOT,
    absolute_root,
)
from streamsmith.object_store import ObjectPath, local_side, s3a_conf


class SparkSpec(StrictModel):
    """Where Spark runs and how it is tuned; see ``streamsmith.spark.session``."""

    master: str = Field(
        default="local[*]", description="local[N], spark://host:port, k8s://..., yarn"
    )
    conf: dict[str, ConfValue] = Field(
        default_factory=dict, description="Spark settings, e.g. spark.sql.shuffle.partitions"
    )
    log_level: Literal["ERROR", "WARN", "INFO", "DEBUG"] = Field(
        default="WARN", description="Spark's log level"
    )


WAREHOUSE_KEY = "spark.sql.warehouse.dir"

FILE_FORMATS = ("json", "jsonl", "csv", "text", "parquet")


# ``schema: infer``: the records' schema is sampled from the input (streamsmith.io.schema_store).
INFER = "infer"
# The schema evolution modes in which a field the schema lacks stops the batch, and those
# in which such records are tagged (to stop the batch, or to be counted).
STOPPING = ("add_new_columns", "fail_on_new_columns")
TAGGING = (*STOPPING, "none")


# The columns of Spark's Kafka source a flow may keep beside a record's fields.
KafkaColumn = Literal[
    "key", "topic", "partition", "offset", "timestamp", "timestampType", "headers"
]


def parser_options(
    evolution: str | None,
    variant: str | None,
    reader_options: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """How records are parsed under a schema evolution mode and a variant column, with a
    file source's JSON ``reader_options`` (``timestampFormat``, ...): the keyword
    arguments of ``streamsmith.transforms.events.RecordParser``."""
    parsing = tuple(sorted(json_parse_options(reader_options or {}).items()))
    return {
        "rescue": evolution == "rescue",
        "evolve": evolution in TAGGING,
        "variant": variant,
        "json_options": parsing,
    }


class SourceSpec(StrictModel):
    """Where a flow's input comes from: a directory of files, or Kafka topics.

    ``min_files_per_trigger`` with ``max_files_per_trigger`` makes batches adaptive: the
    supervisor runs the query with the larger limit while the backlog is larger than the
    smaller one, and with the smaller limit once caught up (see ``runtime.supervisor``).

    File formats: ``json`` (one JSON document per file, as CloudTrail delivers them),
    ``jsonl`` (one JSON object per line), ``csv`` and ``text``; any may be gzipped; they
    need ``path``. ``parquet`` reads Parquet files with the app's schema; pointed at a lake
    table (``tables/<name>``) it follows that table's commit log, so a flow can consume
    another flow's output as a stream, committed batches only. ``kafka`` takes Spark's
    Kafka options under ``options``
    (``kafka.bootstrap.servers``, ``subscribe``, ``startingOffsets``, ...) and reads
    through Spark's JVM connector when it is on the classpath, streamsmith's Python
    connector otherwise (``connector``).

    Files and Kafka have their keys here, shared by their formats. Any other format is a
    source plug-in (``streamsmith.io.sources``, e.g. ``rate`` for tests, or a package's,
    registered under the entry-point group ``streamsmith.sources``): it takes its
    settings under ``options`` and checks them when the plan is built.
    """

    format: str = Field(
        pattern=IDENTIFIER,
        description="json, jsonl, csv, text, parquet, kafka, or a source plug-in (rate, ...)",
    )
    path: str | None = Field(
        default=None,
        description="directory; a relative one from the spec's folder where it is there, "
        "else under storage_root",
    )
    glob: str | None = Field(default=None, description="file name filter, e.g. *.json.gz")
    recursive: bool = Field(default=True, description="read files in subfolders too")
    max_files_per_trigger: int | None = Field(
        default=None, gt=0, description="the most files one micro-batch reads"
    )
    min_files_per_trigger: int | None = Field(
        default=None,
        gt=0,
        description="with max_files_per_trigger: adaptive batches between the two",
    )
    latest_first: bool = Field(default=False, description="read the newest files first")
    archive: str | None = Field(
        default=None,
        description="directory (relative to storage_root) a file moves to, keeping its path "
        "below path, once every flow reading this source has committed it (its table's, "
        "quarantine's and late events' queries): Spark lists path at every trigger, so "
        "path then holds only the unread input; backfill reads both (local files; not "
        "parquet tables); default: files stay",
    )
    compression: Literal["none", "gzip"] = Field(
        default="none",
        description="gzip: files may be gzipped (told by their first bytes) and are decoded "
        "by streamsmith, so a file cut short or corrupt gives the lines before the damage "
        "and one quarantined record naming it, where Spark's reader fails the query (it "
        "reads *.gz files too, but stops at a damaged one) (jsonl and text files)",
    )
    max_decompressed_mb: int = Field(
        default=256,
        gt=0,
        description="the most one file may decode to, in MiB, where streamsmith decodes the "
        "files (json documents; compression: gzip): a file past it (a gzip bomb) is "
        "quarantined as too large; a decoder holds up to this much for a file it keeps",
    )
    connector: Literal["auto", "jvm", "python"] = Field(
        default="auto", description="Kafka: Spark's JVM connector, or streamsmith's Python one"
    )
    options: dict[str, ConfValue] = Field(
        default_factory=dict,
        description="reader options: a file format's (timestampFormat, dateFormat, ...: see "
        "the file source option reference), Kafka's (see the Kafka option reference), or a "
        "plug-in's; an option the format does not take is an error",
    )
    kafka_columns: tuple[KafkaColumn, ...] = Field(
        default=(),
        description="Kafka: the record's own columns a flow reads beside the value's fields "
        "(key, topic, partition, offset, timestamp, timestampType, headers), as Spark's "
        "Kafka source names them; e.g. timestamp as the event time",
    )
    value_format: Literal["json", "avro", "protobuf"] = Field(
        default="json",
        description="Kafka: how values are encoded: json (parsed with the schema; "
        "options.valueFormat=json decodes them at the source), avro (decoded with "
        "spark-avro's from_avro by value_schema, which then gives the records' schema) or "
        "protobuf (decoded in Python by value_schema's message value_message); a value "
        "that does not decode is quarantined with its raw bytes (base64)",
    )
    value_schema: str | None = Field(
        default=None,
        description="Kafka, value_format: avro or protobuf: the Avro schema file (.avsc, a "
        "record) or the Protobuf descriptor set (protoc --include_imports "
        "--descriptor_set_out), relative to the spec's folder",
    )
    value_message: str | None = Field(
        default=None,
        description="Kafka, value_format: protobuf: the full name of the values' message "
        "in value_schema, e.g. shop.Click",
    )
    value_wire_format: Literal["plain", "confluent"] = Field(
        default="plain",
        description="Kafka, value_format: avro or protobuf: plain records, or the Confluent "
        "wire format (a magic byte 0 and the 4-byte schema id before each record, and for "
        "Protobuf the message indexes; a value without them is quarantined)",
    )
    value_schema_id: int | None = Field(
        default=None,
        ge=0,
        description="Kafka, value_wire_format: confluent: the schema id of value_schema in "
        "the registry; a value written with another id is quarantined",
    )
    record_schema: str | None = Field(
        default=None,
        alias="schema",
        description='the records\' schema as DDL, e.g. "user string, ts timestamp", or '
        "infer: sampled from the first input (jsonl files), stored as version 0",
    )
    schema_hints: str | None = Field(
        default=None,
        description='with schema: infer, DDL of the fields whose type you decide, e.g. "amount '
        'decimal(12,2)"',
    )
    schema_evolution: Literal["add_new_columns", "rescue", "fail_on_new_columns", "none"] | None = (
        Field(
            default=None,
            description="add_new_columns (the default with schema: infer): a new field becomes a "
            "new schema version and column; rescue: fields the schema lacks, and values of the "
            "wrong type, go as JSON into the _rescued_data column; fail_on_new_columns: a new "
            "field stops the flow, naming it; none: new fields are left out and counted "
            "(expectation known_fields) (jsonl files, Kafka JSON values)",
        )
    )
    required: tuple[str, ...] = Field(
        default=(), description="fields a record must have, else it is quarantined"
    )
    table: str | None = Field(
        default=None,
        pattern=IDENTIFIER,
        description="delta: a table a flow of this pipeline writes (sink format delta), "
        "read as a stream; a flow may also name that table as its source directly",
    )
    read_change_feed: bool = Field(
        default=False,
        description="delta: read the table's change data feed (rows with _change_type, "
        "_commit_version, _commit_timestamp) instead of its appended rows",
    )
    variant: str | None = Field(
        default=None,
        pattern=IDENTIFIER,
        description="name of a VARIANT column keeping each whole record (read any field with "
        "variant_get), beside the typed columns or, without a schema, alone",
    )

    @property
    def is_file_source(self) -> bool:
        return self.format in FILE_FORMATS

    @property
    def reads_raw_json(self) -> bool:
        """Whether the flow needs each record's JSON text (schema evolution, a variant
        column, files streamsmith decodes), so a JSON-lines source hands over whole lines."""
        return self.evolution is not None or self.variant is not None or self.decodes_files

    @property
    def decodes_files(self) -> bool:
        """Whether streamsmith decodes the files (compression: gzip) rather than Spark."""
        return self.compression != "none"

    @property
    def parser_options(self) -> dict[str, Any]:
        """The keyword arguments of the parser that reads this source's records."""
        reader = self.options if self.is_file_source else None
        options = parser_options(self.evolution, self.variant, reader)
        return {**options, "keep": self.kafka_columns} if self.kafka_columns else options

    @property
    def evolution(self) -> str | None:
        """The schema evolution mode in force: the one given, or add_new_columns with
        schema: infer."""
        if self.schema_evolution is None and self.record_schema == INFER:
            return "add_new_columns"
        return self.schema_evolution

    @property
    def binary_values(self) -> bool:
        """Whether the values are Avro or Protobuf records, decoded by ``value_schema``."""
        return self.value_format in ("avro", "protobuf")

    def _fits_its_value_format(self) -> None:
        keys = ("value_schema", "value_message", "value_schema_id")
        if not self.binary_values:
            given = [k for k in keys if getattr(self, k) is not None]
            if given or self.value_wire_format != "plain":
                raise ValueError(
                    f"{', '.join(given) or 'value_wire_format'} is for Avro or Protobuf "
                    "values: set value_format: avro or protobuf"
                )
            return
        kind = self.value_format
        if self.format != "kafka":
            raise ValueError(f"value_format: {kind} is for kafka sources")
        if self.value_schema is None:
            file = ".avsc file" if kind == "avro" else "descriptor set (.desc)"
            raise ValueError(f"value_format: {kind} needs value_schema, the {file} of the values")
        if kind == "protobuf" and not self.value_message:
            raise ValueError(
                "value_format: protobuf needs value_message, the full name of the values' "
                "message in value_schema (e.g. shop.Click)"
            )
        if kind == "avro" and self.value_message is not None:
            raise ValueError("value_message is for value_format: protobuf")
        if self.record_schema is not None or self.variant or self.schema_evolution:
            raise ValueError(
                f"with value_format: {kind} the records' schema is value_schema's: remove "
                "schema (and variant, schema_evolution: they read JSON)"
            )
        keys_given = {key.lower() for key in self.options}
        if keys_given & {"valueformat", "valueschema", "columns"}:
            raise ValueError(
                "options.valueFormat/valueSchema decode JSON at the source: remove them with "
                f"value_format: {kind}"
            )
        if self.value_schema_id is not None and self.value_wire_format != "confluent":
            raise ValueError(
                "value_schema_id is the id in the Confluent wire format: set "
                "value_wire_format: confluent"
            )

    @model_validator(mode="after")
    def _fits_its_format(self) -> SourceSpec:
        self._fits_its_value_format()
        if self.archive is not None and not (self.is_file_source and self.format != "parquet"):
            raise ValueError(
                "archive moves a file source's files once read: json, jsonl, csv or text"
            )
        if self.kafka_columns and self.format != "kafka":
            raise ValueError("kafka_columns are a Kafka record's: set format: kafka")
        if self.schema_hints is not None and self.record_schema != INFER:
            raise ValueError("schema_hints go with schema: infer (a DDL schema says every type)")
        json_values = self.format == "jsonl" or (
            self.format == "kafka"
            and str(
                {k.lower(): v for k, v in self.options.items()}.get("valueformat", "raw")
            ).lower()
            != "json"
        )
        if self.record_schema == INFER and not json_values:
            raise ValueError(
                "schema: infer samples JSON: jsonl files, or Kafka values the flow decodes "
                "(not valueFormat=json); other formats: give the schema as DDL"
            )
        if self.schema_evolution == "add_new_columns" and self.record_schema != INFER:
            raise ValueError(
                "schema_evolution: add_new_columns adds fields to an inferred schema: set "
                "schema: infer (a DDL schema can keep what it lacks with rescue)"
            )
        if self.variant is not None and not json_values:
            raise ValueError(
                "variant keeps each whole JSON record: it needs jsonl files, or Kafka values "
                "decoded by the flow (not valueFormat=json)"
            )
        if self.schema_evolution is not None and not json_values:
            raise ValueError(
                f"schema_evolution: {self.schema_evolution} tells what the schema lacks from "
                "the raw JSON: it needs jsonl files, or Kafka values decoded by the flow (not "
                "valueFormat=json)"
            )
        if self.format == "delta":
            return self._fits_delta()
        if self.table is not None or self.read_change_feed:
            raise ValueError("table and read_change_feed are for delta sources")
        if self.decodes_files and self.format not in ("jsonl", "text"):
            raise ValueError(
                f"compression: {self.compression} is for jsonl and text files (json documents "
                "are decoded by streamsmith already, gzipped or not; csv and parquet by Spark)"
            )
        if self.is_file_source:
            if not self.path:
                raise ValueError(f"a {self.format} source needs a path (a directory of files)")
            low, high = self.min_files_per_trigger, self.max_files_per_trigger
            if low is not None and (high is None or low > high):
                raise ValueError(
                    "min_files_per_trigger turns on adaptive batches and needs "
                    "max_files_per_trigger at least as large (the largest batch)"
                )
            return self
        keys = {key.lower() for key in self.options}
        if self.format == "kafka" and len(keys & {"subscribe", "subscribepattern", "assign"}) != 1:
            raise ValueError(
                "a kafka source needs exactly one of subscribe, subscribePattern, assign"
            )
        if (
            self.path
            or self.glob
            or self.max_files_per_trigger
            or self.min_files_per_trigger
            or self.latest_first
        ):
            hint = "use options.maxOffsetsPerTrigger for kafka" if self.format == "kafka" else ""
            raise ValueError(
                "path, glob, max/min_files_per_trigger and latest_first are for file sources; "
                + (hint or f"a {self.format} source takes its settings under options")
            )
        if self.connector != "auto" and self.format != "kafka":
            raise ValueError("connector is for kafka sources")
        return self

    def _fits_delta(self) -> SourceSpec:
        if (self.table is None) == (self.path is None):
            raise ValueError(
                "a delta source reads either a table of this pipeline (table: <name>) or "
                "a Delta table elsewhere (path: <folder>): give exactly one"
            )
        if self.record_schema is not None:
            raise ValueError("a delta source reads the table's own schema: remove schema")
        given = {key: getattr(self, key) for key in _FILE_ONLY if getattr(self, key)}
        if given or self.required or self.connector != "auto" or self.compression != "none":
            raise ValueError(
                f"{', '.join(given) or 'that key'} is not for a delta source: Delta's own "
                "read options (maxFilesPerTrigger, skipChangeCommits, startingVersion, ...) "
                "go under options"
            )
        return self


_FILE_ONLY = ("glob", "max_files_per_trigger", "min_files_per_trigger", "latest_first",
              "schema_hints", "schema_evolution", "variant")  # fmt: skip

OutputMode = Literal["append", "update", "complete"]

# Sink settings under these names (or with these words in an option's name) are secrets:
# kept as ``SecretStr`` in the spec, never printed, and redacted from the event log.
_SECRET_SETTINGS = frozenset({"url", "dsn", "password", "token"})
_SECRET_WORDS = ("password", "secret", "jaas", "token")
MASK = "***"


def is_secret_key(key: object) -> bool:
    """Whether an option under ``key`` holds a secret (``kafka.sasl.jaas.config``,
    ``kafka.ssl.key.password``, ``client_secret``, ``token``): masked by key wherever
    options are shown, whatever its value looks like."""
    return any(word in str(key).lower() for word in _SECRET_WORDS)


def masked_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` as they may be shown: each secret's value replaced by ``***``."""
    return {key: MASK if is_secret_key(key) else value for key, value in options.items()}


class SinkSpec(BaseModel):
    """Where a flow's output goes: ``format`` names a sink, the other keys are its options.

    The spec knows no sink format: each one (``streamsmith.io.sinks``, or a package's,
    registered under the entry-point group ``streamsmith.sinks``) brings its own typed
    options model, and the plan validates the keys against it. ``output_mode`` is
    Spark's, common to every sink (which modes a sink takes is the sink's to say).
    """

    model_config = ConfigDict(extra="allow", frozen=True, str_strip_whitespace=True)

    format: str = Field(default="delta", pattern=IDENTIFIER, description="see Sink formats below")
    output_mode: OutputMode = Field(
        default="append", description="append: new rows; update: changed rows; complete: all"
    )

    @model_validator(mode="before")
    @classmethod
    def _secrets_stay_secret(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        return {
            key: SecretStr(value) if key in _SECRET_SETTINGS and isinstance(value, str) else value
            for key, value in data.items()
        }

    @property
    def settings(self) -> dict[str, Any]:
        """The sink's own keys (everything but ``format`` and ``output_mode``)."""
        return dict(self.model_extra or {})

    def secrets(self) -> list[str]:
        """Values of this sink's settings that must never be shown."""
        found = [v.get_secret_value() for v in self.settings.values() if isinstance(v, SecretStr)]
        options = self.settings.get("options")
        if isinstance(options, Mapping):
            found += [str(value) for key, value in options.items() if is_secret_key(key)]
        return found


class PostgresSpec(StrictModel):
    """The PostgreSQL server postgres sinks write to.

    ``dsn`` (a libpq connection string or URI) wins; else the environment variable named
    by ``dsn_env``; else the embedded server under the storage root (``streamsmith db
    start``). The DSN is a secret: it is never printed, logged or shown by ``dry-run``.
    """

    dsn: SecretStr | None = Field(default=None, description="libpq DSN or URI (a secret)")
    dsn_env: str = Field(
        default="STREAMSMITH_PG_DSN", description="the environment variable holding the DSN"
    )
    db_schema: str = Field(
        default="public", pattern=IDENTIFIER, description="the schema tables are made in"
    )


class KafkaSpec(StrictModel):
    """The Kafka cluster that kafka sources and sinks use unless they set their own."""

    bootstrap_servers: str | None = Field(default=None, description="host:port[,host:port]")
    options: dict[str, ConfValue] = Field(
        default_factory=dict, description="librdkafka settings for every source and sink"
    )


class EventTimeSpec(StrictModel):
    """A flow's event time, declared once: the watermark, the windows and the
    late-events table all follow it.

    ``column`` holds the event time; ``lateness`` is how late an event may arrive and
    still count (the watermark delay); ``window`` (with ``slide`` for sliding windows)
    gives the flow's input a ``window`` column to group by; ``gap`` closes the sessions of
    a flow that keeps sessions. A flow whose code declares its event time takes these as
    overrides: set only what changes, e.g. ``--set flows.f.event_time.lateness=2h``.
    """

    column: str | None = Field(default=None, description="the event-time column")
    lateness: Duration | None = Field(default=None, description="watermark delay, e.g. 10 minutes")
    window: Duration | None = Field(default=None, description="window size, e.g. 1 hour")
    slide: Duration | None = Field(default=None, description="step of sliding windows")
    gap: Duration | None = Field(default=None, description="inactivity that closes a session")


ExpectAction = Literal["warn", "drop", "quarantine", "fail"]


class ExpectationSpec(StrictModel):
    """A rule each of a flow's records should meet: ``sql``, a SQL boolean expression over
    the record's fields (a record passes only when it is true; null fails), and what to
    do with a record that fails: ``warn`` (count it, keep it), ``drop`` (count it, leave
    it out), ``quarantine`` (to the quarantine table, the expectation's name as the
    reason) or ``fail`` (stop the flow, naming the expectation and one such record).
    Every batch's passed and failed counts go to the event log, status and metrics."""

    sql: str = Field(description="a SQL boolean over the record")
    action: ExpectAction = Field(default="warn", description="what a failing record does")

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, data: Any) -> Any:
        return {"sql": data} if isinstance(data, str) else data


class CdcSpec(StrictModel):
    """Change data capture: the flow's rows are change events, applied to its Delta table
    by key (as Lakeflow's ``create_auto_cdc_flow`` applies them).

    ``keys`` identify a row; ``sequence_by`` (a column or SQL expression) orders the
    changes of a key, so duplicates and out-of-order events resolve by it, never by
    arrival; ``apply_as_deletes`` (a SQL boolean) marks the events that delete their key;
    ``except_columns`` are left out of the table. ``scd_type: 1`` keeps the latest row
    per key; ``scd_type: 2`` keeps every version of it, with ``__START_AT`` and
    ``__END_AT``: a change in ``track_history_columns`` (by default every column but the
    keys, the except columns and the sequence column) opens a version, a change in the
    other columns updates the current one in place. ``ignore_null_updates: true`` makes an
    update's null columns keep the key's values (a partial update); ``apply_as_truncates``
    (a SQL boolean, ``scd_type: 1`` only) marks the events that empty the table. See
    docs/how-to/change-data-capture.md.
    """

    keys: tuple[str, ...] = Field(min_length=1, description="the columns that identify a row")
    sequence_by: str = Field(
        min_length=1, description="a column or SQL expression ordering a key's changes"
    )
    apply_as_deletes: str | None = Field(
        default=None, description="a SQL boolean: true for an event that deletes its key"
    )
    except_columns: tuple[str, ...] = Field(
        default=(), description="columns of the events left out of the table"
    )
    scd_type: Literal[1, 2] = Field(
        default=1, description="1: the latest row per key; 2: every version, with validity"
    )
    track_history_columns: tuple[str, ...] | None = Field(
        default=None,
        description="scd_type 2: the columns whose change opens a version (default: all "
        "but keys, except_columns and the sequence column)",
    )

    ignore_null_updates: bool = Field(
        default=False,
        description="true: an update's null columns keep the key's values before it",
    )
    apply_as_truncates: str | None = Field(
        default=None,
        description="scd_type 1: a SQL boolean, true for an event that truncates the table "
        "(every change up to its sequence is gone)",
    )

    @model_validator(mode="after")
    def _columns_are_consistent(self) -> CdcSpec:
        for name, columns in (("keys", self.keys), ("except_columns", self.except_columns)):
            if len(set(columns)) != len(columns):
                raise ValueError(f"cdc.{name} repeat a column: {list(columns)}")
        both = sorted(set(self.keys) & set(self.except_columns))
        if both:
            raise ValueError(f"cdc.except_columns leaves out key column(s) {', '.join(both)}")
        if self.apply_as_truncates is not None and self.scd_type != 1:
            raise ValueError(
                "cdc.apply_as_truncates is for scd_type: 1 (a history is not truncated)"
            )
        tracked = self.track_history_columns
        if tracked is not None:
            if self.scd_type != 2:
                raise ValueError("cdc.track_history_columns is for scd_type: 2 (history)")
            odd = sorted(set(tracked) & {*self.keys, *self.except_columns})
            if odd:
                raise ValueError(
                    f"cdc.track_history_columns names key or except column(s) {', '.join(odd)}"
                )
        return self


# Names a flow's further sinks may not take: the suffixes of its side queries' names
# (``<app>.<flow>.quarantine``), and of its backfill's in the event log.
RESERVED_SINK_NAMES = ("quarantine", "late", "backfill")


class FlowSpec(StrictModel):
    """One source -> transform -> sink path.

    In an app, the app's code supplies the transform. In a pipeline of your own, the
    spec names it: ``transform`` (``module:function`` taking the source's events and
    returning the output) or ``sql`` (a query over the source, by its name), with the
    flow's ``event_time``.
    """

    source: str = Field(description="the name of one of the spec's sources")
    sink: SinkSpec | None = Field(
        default=None, description="where the output goes: format, output_mode and options"
    )
    sinks: dict[str, SinkSpec] | None = Field(
        default=None,
        description="instead of sink: several sinks by name, each with its own format, "
        "output_mode and options (one query each; the first keeps the flow's query name "
        "and checkpoint, its quarantine and its expectation counts)",
    )
    transform: str | None = Field(default=None, description="module:function")
    sql: str | None = Field(default=None, description="SELECT ... FROM <source>")
    event_time: EventTimeSpec | None = None
    expect: dict[str, ExpectationSpec] = Field(
        default_factory=dict, description='name: "SQL boolean", or name: {sql, action}'
    )
    description: str = Field(default="", description="shown by dry-run")
    streams: dict[str, str] = Field(
        default_factory=dict,
        description="the flow's further streaming inputs (stream-stream joins): input -> source",
    )
    trigger: TriggerText | None = Field(default=None, description="overrides the pipeline trigger")
    schedule: Cron | None = Field(
        default=None,
        description='cron (UTC): this flow\'s own catch-up schedule, e.g. "0 * * * *"',
    )
    enabled: bool = Field(default=True, description="false: the flow does not run")
    cdc: CdcSpec | None = Field(
        default=None,
        description="the rows are change events applied to the flow's delta table by key",
    )
    maintenance: MaintenanceSpec | None = Field(
        default=None,
        description="OPTIMIZE and VACUUM of the flow's delta tables, over the pipeline's "
        "maintenance key by key",
    )

    @model_validator(mode="after")
    def _one_kind_of_code(self) -> FlowSpec:
        if self.transform is not None and self.sql is not None:
            raise ValueError("a flow runs either a transform or sql, not both")
        for name in self.expect:
            if not re.match(IDENTIFIER, name):
                raise ValueError(f"expectation name {name!r} must be an identifier")
        if (self.sink is None) == (self.sinks is None):
            given = "both sink and sinks" if self.sink is not None else "neither sink nor sinks"
            raise ValueError(
                f"the flow has {given}: give sink (one output) or sinks (several, by name)"
            )
        if self.sinks is not None:
            if not self.sinks:
                raise ValueError("sinks is empty: name at least one sink, or use sink")
            for name in self.sinks:
                if not re.match(IDENTIFIER, name) or name in RESERVED_SINK_NAMES:
                    raise ValueError(
                        f"sink name {name!r} must be an identifier other than "
                        f"{', '.join(RESERVED_SINK_NAMES)} (those name the flow's own queries)"
                    )
        return self

    @property
    def named_sinks(self) -> tuple[tuple[str | None, SinkSpec], ...]:
        """The flow's sinks in order, each with its name under ``sinks`` (None for the
        one ``sink``)."""
        if self.sinks is not None:
            return tuple(self.sinks.items())
        assert self.sink is not None  # the validator holds one of the two
        return ((None, self.sink),)

    @property
    def main_sink(self) -> SinkSpec:
        """The ``sink``, or the first of ``sinks``: its query is the flow's own."""
        return self.named_sinks[0][1]


def _sink_tables(flow: Any) -> list[str]:
    """The tables a flow's sink or sinks name (raw spec or model)."""
    if isinstance(flow, Mapping):
        many = flow.get("sinks")
        sinks = [flow.get("sink"), *(many.values() if isinstance(many, Mapping) else ())]
    else:
        sinks = [sink for _, sink in getattr(flow, "named_sinks", ())]
    tables = [
        sink.settings.get("table") if isinstance(sink, SinkSpec) else sink.get("table")
        for sink in sinks
        if isinstance(sink, SinkSpec | Mapping)
    ]
    return [table for table in tables if isinstance(table, str)]


def _source_names(flow: Any) -> list[str]:
    """The sources a raw flow entry names: its ``source`` and its further ``streams``."""
    if not isinstance(flow, Mapping):
        return []
    streams = flow.get("streams")
    names = [flow.get("source"), *(streams.values() if isinstance(streams, Mapping) else ())]
    return [name for name in names if isinstance(name, str)]


class LibraryGlob(StrictModel):
    """Files under the spec's folder: a path, a glob, or ``folder/**`` (everything under it)."""

    include: str = Field(description="a path or glob from the spec's folder, e.g. flows/**")


class LibrarySpec(StrictModel):
    """One entry of ``libraries``, as Spark Declarative Pipelines writes it:
    ``- glob: {include: flows/**}``. Each ``.py`` file found is imported (its
    ``@streamsmith.flow`` functions join the pipeline) and each ``.sql`` file is a flow."""

    glob: LibraryGlob


class PipelineSpec(StrictModel):
    """Everything one app run needs, apart from its code (a pipeline of your own names
    its code in its flows; its name may be given as ``name`` or ``app``)."""

    app: str = Field(
        validation_alias=AliasChoices("app", "name"),
        pattern=IDENTIFIER,
        description="the pipeline's name (also `name`): checkpoints and events are kept by it",
    )
    storage_root: str = Field(
        default=DEFAULT_STORAGE_ROOT,
        description="tables, checkpoints, quarantine, event log ($STREAMSMITH_ROOT, --root): "
        "a folder, or s3a://bucket/prefix (docs/how-to/object-storage.md)",
    )
    trigger: TriggerText = Field(
        default="interval=10s",
        description="available-now | once | interval=<duration> | real-time[=<interval>]",
    )
    schedule: Cron | None = Field(
        default=None,
        description='cron (UTC): `run` stays up and runs a catch-up at each time, e.g. "0 2 * * *"',
    )
    # Always on, a flow's quarantine and late-events queries run at the flow's interval
    # or at this one, whichever is longer: they mostly skip their batches, and each
    # batch still costs planning and log writes that the flow's own batches wait for.
    # At interval=0s (as fast as possible: one batch per arrival, as the tests drive a
    # flow) they follow the flow.
    side_interval: Duration = Field(
        default="5s", description="the slowest interval of quarantine and late-events queries"
    )
    graceful_stop_timeout: Duration = Field(
        default="60s", description="how long SIGTERM waits for the current batch"
    )
    spark: SparkSpec = Field(default_factory=SparkSpec)
    kafka: KafkaSpec = Field(default_factory=KafkaSpec)
    postgres: PostgresSpec = Field(default_factory=PostgresSpec)
    monitor: MonitorSpec = Field(default_factory=MonitorSpec)
    supervisor: SupervisorSpec = Field(default_factory=SupervisorSpec)
    notify: NotifySpec = Field(default_factory=NotifySpec)
    sources: dict[str, SourceSpec]
    flows: dict[str, FlowSpec]
    maintenance: MaintenanceSpec | None = Field(
        default=None,
        description="OPTIMIZE and VACUUM of every delta table the flows write (a flow's own "
        "maintenance sets keys over it)",
    )
    materialized_views: dict[str, MaterializedViewSpec] = Field(
        default_factory=dict,
        description="name: {sql, schedule}: batch queries over the tables, kept as Delta tables",
    )
    libraries: list[LibrarySpec] = Field(
        default_factory=list,
        description="files declaring flows: .py (@streamsmith.flow) and .sql, by glob",
    )
    # Which file or --set each key came from (set by load_spec), so errors found later,
    # when the plan validates a sink's own options, still name their origin.
    _origins: tuple[tuple[str, dict[str, Any]], ...] = PrivateAttr(default=())

    def describe_error(self, exc: ValidationError, at: Sequence[str]) -> str:
        """``exc`` (from validating the part of the spec at the key path ``at``) as one
        line per problem, naming the key and the file or ``--set`` it came from."""
        return describe_validation_error(exc, self._origins, self.app, tuple(at))

    def layer_of(self, at: Sequence[str]) -> int:
        """Which layer last set the key at path ``at``: -1 for the app's default spec,
        else its position among the files, ``--set`` values and overrides."""
        return key_layer(tuple(at), self._origins)

    def origin_of(self, at: Sequence[str]) -> str:
        """The file or ``--set`` the key at path ``at`` came from."""
        return key_origin(tuple(at), self._origins) or f"the default spec of app {self.app!r}"

    @model_validator(mode="before")
    @classmethod
    def _tables_as_sources(cls, data: Any) -> Any:
        """A flow (or a further stream) whose ``source`` names no source but a table
        another flow writes reads that table as a stream, as Spark Declarative Pipelines'
        ``spark.readStream.table(name)`` does: ``source: cleaned`` stands for a source
        ``cleaned: {format: delta, table: cleaned}`` (the plan checks the table is Delta)."""
        if not isinstance(data, Mapping):
            return data
        flows, sources = data.get("flows"), data.get("sources")
        if not isinstance(flows, Mapping) or not isinstance(sources, Mapping):
            return data
        written = {table for flow in flows.values() for table in _sink_tables(flow)}
        wanted = [name for flow in flows.values() for name in _source_names(flow)]
        implied = {
            name: {"format": "delta", "table": name}
            for name in wanted
            if name in written and name not in sources
        }
        return {**data, "sources": {**sources, **implied}} if implied else data

    @model_validator(mode="after")
    def _flows_are_consistent(self) -> PipelineSpec:
        for name in self.sources:  # a source's name is a folder (its schema versions)
            if not re.match(IDENTIFIER, name):
                raise ValueError(f"source name {name!r} must be an identifier (letters, digits, _)")
        for name, flow in self.flows.items():
            if not re.match(IDENTIFIER, name):
                raise ValueError(f"flow name {name!r} must be an identifier (letters, digits, _)")
            if flow.source not in self.sources:
                known = ", ".join(sorted(self.sources)) or "none"
                tables = ", ".join(
                    sorted({t for f in self.flows.values() for t in _sink_tables(f)})
                )
                raise ValueError(
                    f"flow {name!r} reads source {flow.source!r}, which is neither a source "
                    f"nor a table of a flow (sources: {known}; tables: {tables or 'none'})"
                )
            for input_name, source in flow.streams.items():
                if source not in self.sources:
                    raise ValueError(
                        f"flow {name!r} joins stream {input_name!r} from source {source!r}, "
                        f"which is not defined (sources: {', '.join(sorted(self.sources))})"
                    )
        written = {table for flow in self.flows.values() for table in _sink_tables(flow)}
        for name in self.materialized_views:
            if not re.match(IDENTIFIER, name):
                raise ValueError(f"materialized view name {name!r} must be an identifier")
            if name in written:
                raise ValueError(
                    f"materialized view {name!r} has the name of a table a flow writes: "
                    "a view is a table of its own; rename one"
                )
        for name, source_spec in self.sources.items():
            if source_spec.format == "kafka":
                self.check_kafka_servers(f"sources.{name}", source_spec.options)
        if self.monitor.kafka_topic and not self.kafka.bootstrap_servers:
            raise ValueError(
                "monitor.kafka_topic forwards events to the pipeline's Kafka cluster: "
                "set kafka.bootstrap_servers"
            )
        return self

    def check_kafka_servers(self, where: str, options: Mapping[str, ConfValue]) -> None:
        """Fail, naming ``where``, when neither the options nor the spec name Kafka servers."""
        keys = {key.lower() for key in options}
        if "kafka.bootstrap.servers" not in keys and not self.kafka.bootstrap_servers:
            raise ValueError(
                f"{where} has no Kafka servers: set kafka.bootstrap_servers, or "
                f"{where}.options.kafka.bootstrap.servers"
            )

    def kafka_options(self, own: Mapping[str, ConfValue]) -> dict[str, ConfValue]:
        """A source's or sink's Kafka options over the pipeline-wide ``kafka`` block."""
        merged: dict[str, ConfValue] = {f"kafka.{k}": v for k, v in self.kafka.options.items()}
        if self.kafka.bootstrap_servers:
            merged["kafka.bootstrap.servers"] = self.kafka.bootstrap_servers
        merged.update(own)
        return merged

    @property
    def root(self) -> Path:
        """The storage root as an absolute path (an :class:`ObjectPath` on S3)."""
        return absolute_root(self.storage_root, self.spark.conf)

    @property
    def session_spark(self) -> SparkSpec:
        """``spark`` as a session is built with: Spark's warehouse (made on the catalog's
        first use, e.g. by a query naming a missing table) under the storage root unless
        the conf places it, where Spark makes ``spark-warehouse/`` in whatever folder a
        command runs from. No lake table is named ``.spark-warehouse``. A root on S3 adds
        the S3A settings the environment gives (:func:`streamsmith.object_store.s3a_conf`)
        and keeps the warehouse on local disk."""
        root = self.root
        extra: dict[str, ConfValue] = {}
        if isinstance(root, ObjectPath):
            extra.update(s3a_conf(self.spark.conf))
        if WAREHOUSE_KEY not in self.spark.conf:
            extra[WAREHOUSE_KEY] = str(local_side(root) / ".spark-warehouse")
        if not extra:
            return self.spark
        return self.spark.model_copy(update={"conf": {**extra, **self.spark.conf}})

    def archive_path(self, source: str) -> Path | None:
        """Absolute archive directory of a file source (relative: under the storage
        root); None without ``archive``."""
        configured = self.sources[source].archive
        if not configured:
            return None
        path = Path(configured).expanduser()
        return path if path.is_absolute() else self.root / path

    def source_path(self, source: str) -> Path | None:
        """Absolute input directory of a file source (relative paths are under the storage
        root); None for other sources."""
        configured = self.sources[source].path
        if not configured:
            return None
        path = Path(configured).expanduser()
        return path if path.is_absolute() else self.root / path
