"""Event-time building blocks: parse typed events, window them, and find what is too late.

All pure: a frame in, a frame out, the same code for a stream and a batch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, MapType, StringType, StructType, VariantType

from streamsmith.config import parse_duration
from streamsmith.errors import NEW_FIELDS_MARK
from streamsmith.transforms.json_reasons import (
    CORRUPT_MARK,
    MALFORMED_VALUE,
    NOT_UTF8,
    rejected_json_reason,
    with_corrupt_mark,
)
from streamsmith.transforms.quarantine import (
    NEW_FIELDS,
    POSITION,
    READ_ERROR,
    REASON_DETAIL,
    REJECT_REASON,
    SOURCE_FILE,
    reject_reason,
)

# The column that keeps what a record held beyond its schema (``rescue``).
RESCUED = "_rescued_data"
_FIELDS = "_fields"
_TEXT = "_value_text"  # a record's JSON text, parsed here
# A JSON object's members, each as the JSON it was (a VARIANT keeps a number a number,
# an object an object, where a string map would turn both into text).
_MEMBERS = MapType(StringType(), VariantType())
_MEMBERS_DDL = _MEMBERS.simpleString()  # from_json takes a map type as DDL (typed so)
EMPTY_VALUE = "empty value: no JSON record (a Kafka tombstone?)"
WINDOW_START = "window_start"
WINDOW_END = "window_end"


@dataclass(frozen=True)
class RecordParser:
    """The default parser of a flow's records: :func:`parse_events` with a schema and the
    fields a record must hold. A value, not a closure, so flows over one source compare
    equal (they see the same events) and a spec may swap the schema it reads with."""

    schema: StructType
    required: tuple[str, ...] = ()
    rescue: bool = False
    evolve: bool = False
    variant: str | None = None
    json_options: tuple[tuple[str, str], ...] = ()  # timestampFormat, ...: from_json's
    keep: tuple[str, ...] = ()  # the source's own columns kept (a Kafka record's timestamp)

    def __call__(self, source: DataFrame) -> DataFrame:
        return parse_events(
            source,
            self.schema,
            self.required,
            rescue=self.rescue,
            evolve=self.evolve,
            variant=self.variant,
            json_options=dict(self.json_options),
            keep=self.keep,
        )


def parse_events(
    source: DataFrame,
    schema: StructType,
    required: Sequence[str],
    rules: Sequence[tuple[Column, str]] = (),
    *,
    rescue: bool = False,
    evolve: bool = False,
    variant: str | None = None,
    json_options: Mapping[str, str] | None = None,
    keep: Sequence[str] = (),
) -> DataFrame:
    """Typed events from a source frame, tagged for quarantine.

    Works on both kinds of source: files read with the record schema already carry its
    columns; Kafka records (and JSON lines read as text) carry a JSON ``value`` parsed
    here with ``from_json``. A record is rejected when it could not be read or parsed,
    when a ``required`` field is missing or of the wrong type (Spark leaves such a field
    null), or when one of the ``rules`` (a failed condition and its reason) holds.

    With ``rescue``, nothing the schema cannot hold is lost: the top-level fields it lacks
    and the values of the wrong type go, as their JSON text, into ``_rescued_data`` (a
    JSON object with the record's ``_file_path`` and ``_position``; null for a record that
    fits), and a value that is not JSON at all is rejected as malformed. With ``evolve``,
    mistyped values are rescued the same way, but the fields the schema lacks are not:
    each record holding some is tagged with their paths and the record itself
    (``_new_fields``), for :func:`stop_on_new_fields` or to be counted. ``variant`` names
    a ``VARIANT`` column holding the whole record (``variant_get`` reads any field of it,
    whatever the schema says), beside the typed columns. ``json_options`` are
    ``from_json``'s (a file source's ``timestampFormat``, ...). ``keep`` names columns of
    the source itself (a Kafka record's ``timestamp``, ``key``...) kept beside the fields.
    """
    rescue = rescue or evolve
    names = schema.fieldNames()
    if clash := [name for name in keep if name in names]:
        raise ValueError(
            f"kafka_columns {', '.join(clash)}: the record has a field of that name too; "
            "rename the field in the schema or leave the column out"
        )
    if all(name in source.columns for name in names) and not rescue and variant is None:
        parsed = source
    else:  # the JSON text, under a name no record field takes (a field may be "key")
        kept = [F.col(c) for c in source.columns if c not in names]
        text = source.select(*kept, F.col("value").cast("string").alias(_TEXT))
        value = F.col(_TEXT)
        not_utf8 = F.when(~F.is_valid_utf8(value), F.lit(NOT_UTF8))  # tables hold UTF-8
        text = text.withColumn(READ_ERROR, F.coalesce(F.col(READ_ERROR), not_utf8))
        if rescue or variant is not None:  # the members say what did not fit
            parsed = text.withColumn("_event", F.from_json(value, schema, dict(json_options or {})))
        else:  # a value that does not parse whole is rejected, saying why, never nulls
            marked, parse = with_corrupt_mark(schema, json_options)
            parsed = text.withColumn("_event", F.from_json(value, marked, parse))
            event = F.col("_event")
            malformed = F.col(READ_ERROR).isNull() & event[CORRUPT_MARK].isNotNull()
            why = rejected_json_reason(value, schema, json_options, MALFORMED_VALUE)
            corrupt = F.when(event.isNull(), F.lit(EMPTY_VALUE)).when(
                event[CORRUPT_MARK].isNotNull(), F.lit(MALFORMED_VALUE)
            )
            parsed = parsed.withColumn(REASON_DETAIL, F.when(malformed, why)).withColumn(
                READ_ERROR, F.coalesce(F.col(READ_ERROR), corrupt)
            )
        if rescue or variant is not None:  # the record as a map of its members too
            malformed = F.when(F.col(_FIELDS).isNull(), F.lit("malformed JSON value"))
            parsed = parsed.withColumn(_FIELDS, F.from_json(value, _MEMBERS_DDL)).withColumn(
                READ_ERROR, F.coalesce(F.col(READ_ERROR), malformed)
            )
        parsed = parsed.select("*", *(F.col("_event")[name].alias(name) for name in names))
    checks: list[tuple[Column, Column | str]] = [
        *((F.col(name).isNull(), f"missing or invalid field {name}") for name in required),
        *rules,
    ]
    tags = [c for c in source.columns if c.startswith("_") and c not in names]
    tags += [REASON_DETAIL] * (REASON_DETAIL in parsed.columns and REASON_DETAIL not in tags)
    rescued = [_rescued(schema, source.columns, not evolve).alias(RESCUED)] if rescue else []
    if evolve:
        rescued.append(_new_fields(schema, source.columns).alias(NEW_FIELDS))
    if variant is not None:
        rescued.append(F.try_parse_json(F.col(_TEXT)).alias(variant))
    events = parsed.select(*names, *keep, *rescued, *tags)
    return events.withColumn(REJECT_REASON, reject_reason(*checks))


def _unknown(fields: Column, schema: StructType, prefix: str = "") -> Column:
    """The members of a JSON object (``fields``: its map of members) that ``schema``
    lacks, at any depth of nested structs, keyed by their dotted path; members of the
    structs in an array as ``name[].member``, with the JSON array of their values."""
    known = F.array(*(F.lit(name) for name in schema.fieldNames()))
    found = [
        F.transform_keys(
            F.map_filter(fields, lambda k, _: ~F.array_contains(known, k)),
            lambda k, _: F.concat(F.lit(prefix), k),
        )
    ]
    for field in schema.fields:
        kind = field.dataType
        if isinstance(kind, StructType):
            inner = F.try_variant_get(fields[field.name], "$", _MEMBERS_DDL)
            found.append(_unknown(inner, kind, f"{prefix}{field.name}."))
        elif isinstance(kind, ArrayType) and isinstance(kind.elementType, StructType):
            items = F.try_variant_get(fields[field.name], "$", ArrayType(_MEMBERS).simpleString())
            found.append(_unknown_in_items(items, kind.elementType, f"{prefix}{field.name}[]."))
    empty = F.create_map().cast(_MEMBERS)
    return F.map_concat(*(F.coalesce(m, empty) for m in found))


def _unknown_in_items(items: Column, element: StructType, prefix: str) -> Column:
    """What the structs of an array (``items``: each its map of members) hold that
    ``element`` lacks: each path once, with the array of its value in every item (null
    where an item lacks it), so rescuing it loses no item's value."""
    per_item = F.transform(items, lambda item: _unknown(item, element, prefix))
    paths = F.array_distinct(F.flatten(F.transform(per_item, F.map_keys)))
    values = F.transform(
        paths, lambda path: F.to_variant_object(F.transform(per_item, lambda m: m[path]))
    )
    return F.map_from_arrays(paths, values)


def _new_fields(schema: StructType, columns: Sequence[str]) -> Column:
    """The paths of the record's fields the schema lacks (nested ones dotted), with the
    record itself (its JSON, so their types can be told) and where it came from, as
    JSON; null when it has none."""
    unknown = F.map_keys(_unknown(F.col(_FIELDS), schema))
    where = F.col(SOURCE_FILE) if SOURCE_FILE in columns else F.lit("the source")
    if POSITION in columns:
        where = F.concat_ws(" at ", where, F.col(POSITION))
    record = F.struct(
        unknown.alias("fields"),
        where.alias("source"),
        F.col(_TEXT).alias("record"),
    )
    return F.when(F.size(unknown) > 0, F.to_json(record))


# How a batch holding a field the schema lacks stops its query: the mark, the field's
# JSON (see _new_fields), and the end mark, inside the query's error.
_NEW_FIELDS_MARK = NEW_FIELDS_MARK
_NEW_FIELDS_END = " :streamsmith"


def stop_on_new_fields(events: DataFrame) -> DataFrame:
    """``events``, failing the batch at the first record with a field its schema lacks;
    the error carries what :func:`new_fields_in` reads, so the runtime can add the field
    as a new schema version and run the batch again."""
    message = F.concat(F.lit(_NEW_FIELDS_MARK), F.col(NEW_FIELDS), F.lit(_NEW_FIELDS_END))
    stop = F.when(F.col(NEW_FIELDS).isNotNull(), F.raise_error(message)).otherwise(F.lit(True))
    return events.where(stop)


def new_fields_in(error: str) -> tuple[list[str], str, dict[str, Any]] | None:
    """The new fields, where the record holding them came from, and the record, from a
    query's error text (None when the error is another)."""
    # The mark also shows where an error quotes the plan (the raise_error expression,
    # as a Delta write's error does): the message is the occurrence followed by JSON.
    start = error.find(_NEW_FIELDS_MARK)
    while start >= 0:
        end = error.find(_NEW_FIELDS_END, start + 1)
        if end < 0:
            return None
        try:
            found = json.loads(error[start + len(_NEW_FIELDS_MARK) : end])
        except json.JSONDecodeError:
            start = error.find(_NEW_FIELDS_MARK, start + 1)
            continue
        return list(found["fields"]), str(found["source"]), json.loads(found["record"])
    return None


def _rescued(schema: StructType, columns: Sequence[str], unknown: bool) -> Column:
    """The record's fields the schema could not type and, with ``unknown``, those it
    lacks (nested ones by dotted path), as a JSON object of their values as they were
    (``get_json_object`` and ``from_json`` read them back exactly) with where the record
    came from; null when there are none."""
    fields = F.col(_FIELDS)
    untyped = F.array_compact(
        F.array(*(F.when(F.col(name).isNull(), F.lit(name)) for name in schema.fieldNames()))
    )
    mistyped = F.map_filter(
        fields, lambda k, v: ~F.is_variant_null(v) & F.array_contains(untyped, k)
    )
    kept = F.map_concat(_unknown(fields, schema), mistyped) if unknown else mistyped
    lineage = [
        F.create_map(F.lit(key), F.col(column).cast("string").cast("variant"))
        for key, column in (("_file_path", SOURCE_FILE), ("_position", POSITION))
        if column in columns
    ]
    return F.when(F.size(kept) > 0, F.to_json(F.map_concat(kept, *lineage)))


def window_column(time: str, window: str, slide: str | None = None) -> Column:
    """``window(time, ...)``, tumbling unless ``slide`` is given."""
    return F.window(time, window, slide) if slide else F.window(time, window)


def with_event_time(
    events: DataFrame,
    column: str,
    lateness: str,
    window: str | None = None,
    slide: str | None = None,
) -> DataFrame:
    """The events as a batch-like query over them sees them: watermarked by ``lateness``
    on ``column`` and, when a window is declared, with that window as a ``window``
    column to group by. The same frame, streaming or not (a batch ignores watermarks)."""
    events = events.withWatermark(column, lateness)
    if window is None:
        return events
    return events.withColumn("window", window_column(column, window, slide))


def flatten_window(frame: DataFrame, column: str = "window") -> DataFrame:
    """Replace the ``window`` struct by ``window_start`` and ``window_end`` columns, which
    tables, keys and SQL users handle more easily than a struct."""
    others = [c for c in frame.columns if c != column]
    return frame.select(
        F.col(f"{column}.start").alias(WINDOW_START),
        F.col(f"{column}.end").alias(WINDOW_END),
        *others,
    )


def windows_dropped(
    time: Column, watermark_us: int | Column, window: str, slide: str | None
) -> Column:
    """How many of the windows containing ``time`` end at or before the watermark.

    Spark's window aggregation drops a (row, window) pair when the window's end is at or
    before the watermark, so a row of a sliding window can lose some of its windows and
    keep others. Windows start at multiples of the slide (no offset).
    """
    size = int(parse_duration(window) * 1_000_000)
    step = int(parse_duration(slide) * 1_000_000) if slide else size
    if size % step:
        raise ValueError(f"window {window} is not a multiple of its slide {slide}")
    micros = F.unix_micros(time)
    last_start = F.floor(micros / step) * step
    return sum(
        (
            F.when(last_start - index * step + size <= F.lit(watermark_us), 1).otherwise(0)
            for index in range(size // step)
        ),
        F.lit(0),
    )


def may_be_late(time_us: int, watermark_us: int, window: str | None, slide: str | None) -> bool:
    """Whether an event at ``time_us`` loses any window to this watermark: the
    per-row rule of :func:`too_late`, in Python (the earliest window containing the
    event ends a slide after the last window start)."""
    if window is None:
        return time_us <= watermark_us
    size = int(parse_duration(window) * 1_000_000)
    step = int(parse_duration(slide) * 1_000_000) if slide else size
    return (time_us // step) * step + step <= watermark_us


def window_count(window: str | None, slide: str | None) -> int:
    """How many windows contain each event (1 without windows or for tumbling ones)."""
    if window is None or slide is None:
        return 1
    return int(parse_duration(window) // parse_duration(slide))


def too_late(
    events: DataFrame,
    time: str,
    watermark_us: int | Column,
    window: str | None = None,
    slide: str | None = None,
) -> DataFrame:
    """Events a stateful operator with this watermark drops, with ``windows_dropped``.

    Without windows (deduplication, joins) an event is dropped when its time is at or
    before the watermark; with windows, each of its windows that ends by then is.
    """
    if window is None:
        dropped = F.when(F.unix_micros(F.col(time)) <= F.lit(watermark_us), 1).otherwise(0)
    else:
        dropped = windows_dropped(F.col(time), watermark_us, window, slide)
    return events.withColumn("windows_dropped", dropped).where(F.col("windows_dropped") > 0)
