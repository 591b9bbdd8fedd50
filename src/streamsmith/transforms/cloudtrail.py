"""CloudTrail log files -> one flat, typed row per API call (the e-book's streaming ETL).

Input is a *documents* frame (one row per file: ``_source_file``, ``_raw`` text and
``_read_error``), as ``streamsmith.io.files`` reads ``json`` sources. The pipeline:

1. :func:`explode_cloudtrail_records` splits each file's ``Records`` array into one row
   per record, with the record's raw JSON and its parse (``_record``); a file that
   cannot be read, is not JSON or has no ``Records`` array becomes one rejected row.
2. :func:`flatten_cloudtrail_records` validates each record and flattens it into the
   events schema, tagging bad records with a reason.

:func:`cloudtrail_events` composes both. The result is a tagged frame (see
``streamsmith.transforms.quarantine``).

Records are parsed inside the explode on purpose: Spark never pushes a filter below a
generator, so the table's and quarantine's ``_reject_reason`` filters reuse the one
parse. Parsed in a projection after the explode, each record would be parsed twice
(once by the pushed-down filter, once by the projection): measured here, 2.2x slower.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamsmith.schemas.cloudtrail import (
    CLOUDTRAIL_DOCUMENT_SCHEMA,
    CLOUDTRAIL_EVENTS_SCHEMA,
    CLOUDTRAIL_RECORD_SCHEMA,
    CORRUPT_RECORD,
    REQUIRED_FIELDS,
)
from streamsmith.transforms.quarantine import (
    POSITION,
    RAW,
    READ_ERROR,
    REJECT_REASON,
    SOURCE_FILE,
    first_failure,
)

RECORD = "_record"
PERMISSIVE = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_RECORD}
# CloudTrail writes second precision with a Z; some producers add milliseconds or an offset.
_EVENT_TIME_FORMATS = ("yyyy-MM-dd'T'HH:mm:ssXXX", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX")


def parse_event_time(event_time: Column) -> Column:
    """CloudTrail's ISO-8601 ``eventTime`` string as a timestamp, or null if unparseable."""
    return F.coalesce(*[F.try_to_timestamp(event_time, F.lit(fmt)) for fmt in _EVENT_TIME_FORMATS])


def explode_cloudtrail_records(documents: DataFrame) -> DataFrame:
    """One row per CloudTrail record: ``_source_file, _position, _raw, _record, _reject_reason``.

    Rejected files yield a single row whose ``_raw`` is the file text (as far as it could
    be decoded). A file with an empty ``Records`` array yields no rows: CloudTrail
    delivers such files and they hold nothing to lose.
    """
    document = F.from_json(F.col(RAW), CLOUDTRAIL_DOCUMENT_SCHEMA, PERMISSIVE)
    parsed = documents.withColumn("_document", document)
    file_problem = first_failure(
        (F.col(READ_ERROR).isNotNull(), F.concat(F.lit("unreadable file: "), F.col(READ_ERROR))),
        (
            F.col(f"_document.{CORRUPT_RECORD}").isNotNull(),
            "file is not a JSON document",
        ),
        (F.col("_document.Records").isNull(), "file has no Records array"),
    )
    parsed = parsed.withColumn("_file_problem", file_problem)
    records = F.transform(
        F.col("_document.Records"),
        lambda raw, index: F.struct(
            raw.alias("raw"),
            F.concat(F.lit("Records["), index.cast("string"), F.lit("]")).alias("position"),
            F.lit(None).cast("string").alias("problem"),
            F.from_json(raw, CLOUDTRAIL_RECORD_SCHEMA, PERMISSIVE).alias("record"),
        ),
    )
    whole_file = F.array(
        F.struct(
            F.col(RAW).alias("raw"),
            F.lit(None).cast("string").alias("position"),
            F.col("_file_problem").alias("problem"),
            F.lit(None).cast(CLOUDTRAIL_RECORD_SCHEMA).alias("record"),
        )
    )
    items = F.when(F.col("_file_problem").isNull(), records).otherwise(whole_file)
    return parsed.select(F.col(SOURCE_FILE), F.explode(items).alias("_item")).select(
        F.col(SOURCE_FILE),
        F.col("_item.position").alias(POSITION),
        F.col("_item.raw").alias(RAW),
        F.col("_item.record").alias(RECORD),
        F.col("_item.problem").alias(REJECT_REASON),
    )


def _wrong_type_fields(record: Column) -> Column:
    """Comma-separated top-level fields present in the raw JSON but null once typed."""
    names = [f.name for f in CLOUDTRAIL_RECORD_SCHEMA.fields if f.name != CORRUPT_RECORD]
    flagged = [
        F.when(
            record[name].isNull() & F.get_json_object(F.col(RAW), f"$.{name}").isNotNull(),
            F.lit(name),
        )
        for name in names
    ]
    return F.concat_ws(", ", *flagged)


def flatten_cloudtrail_records(records: DataFrame) -> DataFrame:
    """Validate parsed CloudTrail records and flatten them into the events schema.

    Rows keep the tag columns; ``_reject_reason`` names the first problem found: not a
    JSON object, fields of the wrong type, a missing required field, or an unparseable
    ``eventTime``.
    """
    r = F.col(RECORD)
    event_time = parse_event_time(r["eventTime"])
    problem = first_failure(
        (F.col(REJECT_REASON).isNotNull(), F.col(REJECT_REASON)),
        (~F.ltrim(F.col(RAW)).startswith("{"), "record is not a JSON object"),
        (
            r[CORRUPT_RECORD].isNotNull(),
            F.concat(F.lit("record has fields of the wrong type: "), _wrong_type_fields(r)),
        ),
        *[(r[name].isNull(), f"missing required field {name}") for name in REQUIRED_FIELDS],
        (
            event_time.isNull(),
            F.concat(F.lit("unparseable eventTime '"), r["eventTime"], F.lit("'")),
        ),
    )
    identity = r["userIdentity"]
    issuer = identity["sessionContext"]["sessionIssuer"]
    flat = {
        "eventID": r["eventID"],
        "eventTime": event_time,
        "eventSource": r["eventSource"],
        "eventName": r["eventName"],
        "awsRegion": r["awsRegion"],
        "sourceIPAddress": r["sourceIPAddress"],
        "userAgent": r["userAgent"],
        "errorCode": r["errorCode"],
        "errorMessage": r["errorMessage"],
        "readOnly": r["readOnly"],
        "eventType": r["eventType"],
        "eventCategory": r["eventCategory"],
        "managementEvent": r["managementEvent"],
        "recipientAccountId": r["recipientAccountId"],
        "requestID": r["requestID"],
        "eventVersion": r["eventVersion"],
        "userIdentity_type": identity["type"],
        "userIdentity_principalId": identity["principalId"],
        "userIdentity_arn": identity["arn"],
        "userIdentity_accountId": identity["accountId"],
        "userIdentity_accessKeyId": identity["accessKeyId"],
        "userIdentity_userName": identity["userName"],
        "userIdentity_invokedBy": identity["invokedBy"],
        "userIdentity_sessionIssuer": F.coalesce(issuer["userName"], issuer["arn"]),
        "userIdentity_mfaAuthenticated": F.lower(
            identity["sessionContext"]["attributes"]["mfaAuthenticated"]
        )
        == F.lit("true"),
        "requestParameters": r["requestParameters"],
        "responseElements": r["responseElements"],
        "additionalEventData": r["additionalEventData"],
        "resources": r["resources"],
        "source_file": F.col(SOURCE_FILE),
        "date": F.to_date(event_time),
    }
    columns = [
        flat[field.name].cast(field.dataType).alias(field.name)
        for field in CLOUDTRAIL_EVENTS_SCHEMA.fields
    ]
    return records.select(
        *columns,
        F.col(SOURCE_FILE),
        F.col(POSITION),
        F.col(RAW),
        problem.alias(REJECT_REASON),
    )


def cloudtrail_events(documents: DataFrame) -> DataFrame:
    """Documents frame -> tagged CloudTrail events (see the module docstring)."""
    return documents.transform(explode_cloudtrail_records).transform(flatten_cloudtrail_records)
