"""AWS CloudTrail log files: one gzipped JSON document per file, ``{"Records": [...]}``.

Fields follow the CloudTrail record contents reference. Free-form objects
(``requestParameters``, ``responseElements``, ``additionalEventData``, ``resources``)
are declared as strings: Spark's JSON parser then keeps their raw JSON text, so the
table preserves them losslessly without a schema per AWS service.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DateType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

CORRUPT_RECORD = "_corrupt_record"

# The whole file: each element of Records is kept as its raw JSON text, so a bad record
# can be quarantined verbatim and one bad record never spoils its neighbours.
CLOUDTRAIL_DOCUMENT_SCHEMA = StructType(
    [
        StructField("Records", ArrayType(StringType())),
        StructField(CORRUPT_RECORD, StringType()),
    ]
)

SESSION_ISSUER = StructType(
    [
        StructField("type", StringType()),
        StructField("principalId", StringType()),
        StructField("arn", StringType()),
        StructField("accountId", StringType()),
        StructField("userName", StringType()),
    ]
)

USER_IDENTITY = StructType(
    [
        StructField("type", StringType()),
        StructField("principalId", StringType()),
        StructField("arn", StringType()),
        StructField("accountId", StringType()),
        StructField("accessKeyId", StringType()),
        StructField("userName", StringType()),
        StructField("invokedBy", StringType()),
        StructField(
            "sessionContext",
            StructType(
                [
                    StructField("sessionIssuer", SESSION_ISSUER),
                    StructField(
                        "attributes",
                        StructType(
                            [
                                StructField("mfaAuthenticated", StringType()),
                                StructField("creationDate", StringType()),
                            ]
                        ),
                    ),
                ]
            ),
        ),
    ]
)

CLOUDTRAIL_RECORD_SCHEMA = StructType(
    [
        StructField("eventVersion", StringType()),
        StructField("userIdentity", USER_IDENTITY),
        StructField("eventTime", StringType()),
        StructField("eventSource", StringType()),
        StructField("eventName", StringType()),
        StructField("awsRegion", StringType()),
        StructField("sourceIPAddress", StringType()),
        StructField("userAgent", StringType()),
        StructField("errorCode", StringType()),
        StructField("errorMessage", StringType()),
        StructField("requestParameters", StringType()),
        StructField("responseElements", StringType()),
        StructField("additionalEventData", StringType()),
        StructField("requestID", StringType()),
        StructField("eventID", StringType()),
        StructField("readOnly", BooleanType()),
        StructField("resources", StringType()),
        StructField("eventType", StringType()),
        StructField("apiVersion", StringType()),
        StructField("managementEvent", BooleanType()),
        StructField("recipientAccountId", StringType()),
        StructField("sharedEventID", StringType()),
        StructField("vpcEndpointId", StringType()),
        StructField("eventCategory", StringType()),
        StructField(CORRUPT_RECORD, StringType()),
    ]
)

# A record is rejected when any of these is missing: without them an event cannot be
# identified, placed in time or attributed to an API call.
REQUIRED_FIELDS = ("eventID", "eventTime", "eventSource", "eventName")

# The table `cloudtrail_events`, partitioned by `date`.
CLOUDTRAIL_EVENTS_SCHEMA = StructType(
    [
        StructField("eventID", StringType()),
        StructField("eventTime", TimestampType()),
        StructField("eventSource", StringType()),
        StructField("eventName", StringType()),
        StructField("awsRegion", StringType()),
        StructField("sourceIPAddress", StringType()),
        StructField("userAgent", StringType()),
        StructField("errorCode", StringType()),
        StructField("errorMessage", StringType()),
        StructField("readOnly", BooleanType()),
        StructField("eventType", StringType()),
        StructField("eventCategory", StringType()),
        StructField("managementEvent", BooleanType()),
        StructField("recipientAccountId", StringType()),
        StructField("requestID", StringType()),
        StructField("eventVersion", StringType()),
        StructField("userIdentity_type", StringType()),
        StructField("userIdentity_principalId", StringType()),
        StructField("userIdentity_arn", StringType()),
        StructField("userIdentity_accountId", StringType()),
        StructField("userIdentity_accessKeyId", StringType()),
        StructField("userIdentity_userName", StringType()),
        StructField("userIdentity_invokedBy", StringType()),
        StructField("userIdentity_sessionIssuer", StringType()),
        StructField("userIdentity_mfaAuthenticated", BooleanType()),
        StructField("requestParameters", StringType()),
        StructField("responseElements", StringType()),
        StructField("additionalEventData", StringType()),
        StructField("resources", StringType()),
        StructField("source_file", StringType()),
        StructField("date", DateType()),
    ]
)
