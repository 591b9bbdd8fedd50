"""Synthetic AWS CloudTrail log files, byte-for-byte reproducible.

CloudTrail delivers gzipped JSON documents ``{"Records": [...]}`` under
``AWSLogs/<account>/CloudTrail/<region>/YYYY/MM/DD/``. This module writes the same layout
with realistic records and, on request, corrupt files and records of every
:class:`CorruptKind`, and reports exactly how many valid records and quarantine rows a
correct pipeline must produce, so table and quarantine counts can be reconciled.

Corruption plan, with ``p = corrupt_fraction / 2``: each file is corrupt with probability
``p``; each record of a healthy file is replaced by a corrupt one with probability ``p``.
So that small runs still exercise every kind, two rules are layered on top, separately for
files and for records:

* floor: at least ``min(number of kinds, floor(expected))`` of them are corrupt, where
  ``expected`` is ``files * p`` (resp. ``healthy records * p``); the extra ones sit at
  random positions;
* cycle: the first corrupt files (resp. records) take the kinds in declaration order;
  later ones pick a kind at random.

Hence ``files=20, records_per_file=20, corrupt_fraction=0.5`` yields every kind for any
seed, unless all 20 files come out corrupt (probability about 1e-10).
"""

from __future__ import annotations

import enum
import gzip
import json
import os
import random
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from itertools import accumulate
from pathlib import Path
from typing import Any

from streamsmith.generate import check_corruption_and_time

__all__ = [
    "FILE_LEVEL_KINDS",
    "RECORD_LEVEL_KINDS",
    "CloudTrailGenerationReport",
    "CorruptKind",
    "generate_cloudtrail",
]


class CorruptKind(str, enum.Enum):  # noqa: UP042 - the API asks for a str mixin
    """Ways a CloudTrail input can be broken; each occurrence is one quarantine row."""

    # File level: the whole file is unusable.
    TRUNCATED_GZIP = "truncated_gzip"
    NOT_JSON = "not_json"
    NO_RECORDS = "no_records"
    # Record level: one bad element of Records inside an otherwise valid file.
    MISSING_EVENT_ID = "missing_event_id"
    MISSING_EVENT_TIME = "missing_event_time"
    BAD_EVENT_TIME = "bad_event_time"
    NOT_AN_OBJECT = "not_an_object"
    WRONG_TYPE = "wrong_type"


FILE_LEVEL_KINDS: tuple[CorruptKind, ...] = (
    CorruptKind.TRUNCATED_GZIP,
    CorruptKind.NOT_JSON,
    CorruptKind.NO_RECORDS,
)
RECORD_LEVEL_KINDS: tuple[CorruptKind, ...] = (
    CorruptKind.MISSING_EVENT_ID,
    CorruptKind.MISSING_EVENT_TIME,
    CorruptKind.BAD_EVENT_TIME,
    CorruptKind.NOT_AN_OBJECT,
    CorruptKind.WRONG_TYPE,
)


@dataclass(frozen=True)
class CloudTrailGenerationReport:
    """What was written, and what a correct pipeline must therefore produce."""

    files_written: int
    valid_records: int
    quarantine_rows: int
    by_kind: dict[str, int]
    paths: tuple[str, ...]
    valid_event_ids: frozenset[str]


# --------------------------------------------------------------------------- constants

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EVENT_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_UPPER_ALNUM = string.ascii_uppercase + string.digits
_HEX = "0123456789abcdef"
_BASE64 = string.ascii_letters + string.digits + "+/"
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

# (account id, alias); weights make the production account the busiest.
_ACCOUNTS = (
    ("418273645091", "acme-prod"),
    ("730596182734", "acme-staging"),
    ("265814370952", "acme-sandbox"),
)
_ACCOUNT_WEIGHTS = (6, 3, 1)
_REGIONS = (
    "us-east-1",
    "us-east-2",
    "us-west-2",
    "eu-west-1",
    "eu-central-1",
    "ap-southeast-2",
    "ap-northeast-1",
)
_REGION_WEIGHTS = (8, 2, 4, 4, 3, 1, 1)
# IAM is a global service: AWS records its calls in us-east-1 only.
_GLOBAL_REGION = "us-east-1"

_USERS = ("alice", "bob", "carol", "deploy-bot", "ci-runner")
_ROLES = (
    "OrganizationAccountAccessRole",
    "AWSReservedSSO_AdministratorAccess_5f2c1e9a0b7d4c3e",
    "orders-api-lambda-exec",
    "eks-nodegroup-workers",
    "github-actions-deploy",
)
_SESSION_NAMES = (
    "alice@acme.example",
    "bob@acme.example",
    "botocore-session-1763630000",
    "i-0a1b2c3d4e5f60718",
    "GitHubActions",
)
_IP_PREFIXES = ("54.239.", "52.94.", "3.120.", "81.2.69.", "185.60.216.", "91.198.174.")
_API_USER_AGENTS = (
    "aws-cli/2.15.30 Python/3.11.8 Linux/6.5.0-1016-aws exe/x86_64.ubuntu.22 prompt/off",
    "aws-cli/2.13.25 Python/3.11.6 Darwin/23.1.0 exe/x86_64 prompt/off",
    "Boto3/1.34.69 md/Botocore#1.34.69 ua/2.0 os/linux#6.1.79 md/arch#x86_64 "
    "lang/python#3.11.8 md/pyimpl#CPython cfg/retry-mode#legacy Botocore/1.34.69",
    "aws-sdk-java/2.25.16 Linux/5.10.210-201.852.amzn2.x86_64 "
    "OpenJDK_64-Bit_Server_VM/17.0.10+7-LTS Java/17.0.10 vendor/Amazon.com_Inc. io/sync",
    "aws-sdk-go-v2/1.25.2 os/linux lang/go#1.22.1 md/GOOS#linux md/GOARCH#amd64",
    "console.amazonaws.com",
)
_BROWSER_USER_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
)
_IDENTITY_WEIGHTS = {"AssumedRole": 55, "IAMUser": 25, "AWSService": 15, "Root": 5}
_ERROR_RATE = 0.05

_INSTANCE_TYPES = ("t3.micro", "t3.large", "m5.xlarge", "c6g.2xlarge", "r6i.large")
_FUNCTIONS = ("orders-api", "thumbnailer", "nightly-report")
_TABLES = ("orders", "sessions", "inventory")
_MANAGED_POLICIES = ("ReadOnlyAccess", "AmazonS3ReadOnlyAccess", "AdministratorAccess")

# Values that must never parse as a timestamp, nor look like a JSON object once Spark
# has unquoted a string element of Records.
_BAD_EVENT_TIMES = ("yesterday", "2026-13-45T99:00:00Z", "not-a-timestamp", "20/11/2026 14:03")
_NOT_AN_OBJECT = ("record dropped by log forwarder", "ERROR: payload too large", 0, 42, -1)


# ----------------------------------------------------------------------------- helpers


def _hex(rng: random.Random, length: int) -> str:
    return "".join(rng.choices(_HEX, k=length))


def _alnum(rng: random.Random, length: int) -> str:
    return "".join(rng.choices(_UPPER_ALNUM, k=length))


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _event_time(when: datetime) -> str:
    return when.strftime(_EVENT_TIME_FORMAT)


def _console_date(when: datetime) -> str:
    """IAM/STS response dates, e.g. ``Nov 20, 2026, 2:03:04 PM`` (locale-independent)."""
    hour = when.hour % 12 or 12
    meridiem = "AM" if when.hour < 12 else "PM"
    return (
        f"{_MONTHS[when.month - 1]} {when.day}, {when.year}, "
        f"{hour}:{when.minute:02d}:{when.second:02d} {meridiem}"
    )


@cache
def _stable_id(prefix: str, length: int, *parts: str) -> str:
    """An AWS-style id that is the same for a principal across runs and seeds."""
    rng = random.Random("|".join((prefix, *parts)))
    return prefix + "".join(rng.choices(_UPPER_ALNUM, k=length - len(prefix)))


@cache
def _kms_key_arn(account: str, region: str, index: int) -> str:
    bits = random.Random(f"kms|{account}|{region}|{index}").getrandbits(128)
    return f"arn:aws:kms:{region}:{account}:key/{uuid.UUID(int=bits, version=4)}"


def _ip_address(rng: random.Random) -> str:
    prefix = rng.choice(_IP_PREFIXES)
    missing = 4 - prefix.count(".")
    return prefix + ".".join(str(rng.randint(1, 254)) for _ in range(missing))


def _resource(account: str, kind: str, arn: str) -> dict[str, str]:
    return {"accountId": account, "type": kind, "ARN": arn}


# ---------------------------------------------------------------------- event catalogue


@dataclass(frozen=True)
class _Call:
    """What an event builder needs to know about the API call it describes."""

    rng: random.Random
    account: str
    alias: str
    region: str
    when: datetime
    request_id: str


@dataclass(frozen=True)
class _Payload:
    """The event-specific parts of a record."""

    request: dict[str, Any] | None
    response: dict[str, Any] | None = None
    resources: list[dict[str, str]] | None = None
    additional: dict[str, Any] | None = None


def _ec2_run_instances(c: _Call) -> _Payload:
    image = f"ami-{_hex(c.rng, 17)}"
    instance = f"i-{_hex(c.rng, 17)}"
    instance_type = c.rng.choice(_INSTANCE_TYPES)
    return _Payload(
        request={
            "instancesSet": {"items": [{"imageId": image, "minCount": 1, "maxCount": 1}]},
            "instanceType": instance_type,
            "monitoring": {"enabled": False},
            "disableApiTermination": False,
            "clientToken": _uuid(c.rng),
        },
        response={
            "requestId": c.request_id,
            "reservationId": f"r-{_hex(c.rng, 17)}",
            "ownerId": c.account,
            "instancesSet": {
                "items": [
                    {
                        "instanceId": instance,
                        "imageId": image,
                        "instanceType": instance_type,
                        "instanceState": {"code": 0, "name": "pending"},
                        "placement": {"availabilityZone": c.region + c.rng.choice("abc")},
                    }
                ]
            },
        },
        resources=[
            _resource(
                c.account,
                "AWS::EC2::Instance",
                f"arn:aws:ec2:{c.region}:{c.account}:instance/{instance}",
            )
        ],
    )


def _ec2_describe_instances(c: _Call) -> _Payload:
    if c.rng.random() < 0.5:
        return _Payload({"instancesSet": {}, "filterSet": {}, "maxResults": 1000})
    instance = f"i-{_hex(c.rng, 17)}"
    return _Payload({"instancesSet": {"items": [{"instanceId": instance}]}, "filterSet": {}})


def _ec2_state_change(current: tuple[int, str]) -> Callable[[_Call], _Payload]:
    def build(c: _Call) -> _Payload:
        instance = f"i-{_hex(c.rng, 17)}"
        item = {
            "instanceId": instance,
            "currentState": {"code": current[0], "name": current[1]},
            "previousState": {"code": 16, "name": "running"},
        }
        return _Payload(
            request={"instancesSet": {"items": [{"instanceId": instance}]}, "force": False},
            response={"requestId": c.request_id, "instancesSet": {"items": [item]}},
        )

    return build


def _s3_bucket(c: _Call) -> str:
    return f"{c.alias}-{c.rng.choice(('data-lake', 'artifacts', 'exports'))}"


def _s3_key(c: _Call) -> str:
    n = c.rng.randrange(100_000)
    return c.rng.choice(
        (
            f"raw/orders/{c.when:%Y/%m/%d}/part-{n:05d}.parquet",
            f"exports/report-{n}.csv",
            f"builds/{_hex(c.rng, 8)}/app.zip",
        )
    )


def _s3_transfer(c: _Call, bytes_in: int, bytes_out: int) -> dict[str, Any]:
    return {
        "SignatureVersion": "SigV4",
        "CipherSuite": "TLS_AES_128_GCM_SHA256",
        "bytesTransferredIn": bytes_in,
        "AuthenticationMethod": "AuthHeader",
        "x-amz-id-2": "".join(c.rng.choices(_BASE64, k=76)),
        "bytesTransferredOut": bytes_out,
    }


def _s3_object(*, upload: bool, response: dict[str, Any] | None) -> Callable[[_Call], _Payload]:
    def build(c: _Call) -> _Payload:
        bucket, key = _s3_bucket(c), _s3_key(c)
        size = c.rng.randint(200, 50_000_000)
        return _Payload(
            request={
                "bucketName": bucket,
                "Host": f"{bucket}.s3.{c.region}.amazonaws.com",
                "key": key,
            },
            response=response,
            resources=[
                _resource(c.account, "AWS::S3::Object", f"arn:aws:s3:::{bucket}/{key}"),
                _resource(c.account, "AWS::S3::Bucket", f"arn:aws:s3:::{bucket}"),
            ],
            additional=_s3_transfer(c, size if upload else 0, 0 if upload else size),
        )

    return build


def _s3_list_buckets(c: _Call) -> _Payload:
    return _Payload(
        request={"Host": f"s3.{c.region}.amazonaws.com"},
        additional=_s3_transfer(c, 0, c.rng.randint(500, 5000)),
    )


def _iam_create_user(c: _Call) -> _Payload:
    user = f"svc-{c.rng.choice(('etl', 'backup', 'grafana', 'vendor'))}-{c.rng.randrange(100)}"
    return _Payload(
        request={"userName": user},
        response={
            "user": {
                "path": "/",
                "userName": user,
                "userId": _stable_id("AIDA", 21, c.account, user),
                "arn": f"arn:aws:iam::{c.account}:user/{user}",
                "createDate": _console_date(c.when),
            }
        },
    )


def _iam_attach_role_policy(c: _Call) -> _Payload:
    role = c.rng.choice(_ROLES)
    return _Payload(
        request={
            "roleName": role,
            "policyArn": f"arn:aws:iam::aws:policy/{c.rng.choice(_MANAGED_POLICIES)}",
        },
        resources=[_resource(c.account, "AWS::IAM::Role", f"arn:aws:iam::{c.account}:role/{role}")],
    )


def _iam_create_access_key(c: _Call) -> _Payload:
    user = c.rng.choice(_USERS)
    return _Payload(
        request={"userName": user},
        response={
            "accessKey": {
                "userName": user,
                "accessKeyId": "AKIA" + _alnum(c.rng, 16),
                "status": "Active",
                "createDate": _console_date(c.when),
            }
        },
    )


def _sts_assume_role(c: _Call) -> _Payload:
    target, _ = c.rng.choices(_ACCOUNTS, weights=_ACCOUNT_WEIGHTS)[0]
    role = c.rng.choice(_ROLES)
    session = c.rng.choice(_SESSION_NAMES)
    role_arn = f"arn:aws:iam::{target}:role/{role}"
    return _Payload(
        request={"roleArn": role_arn, "roleSessionName": session, "durationSeconds": 3600},
        response={
            "credentials": {
                "accessKeyId": "ASIA" + _alnum(c.rng, 16),
                "sessionToken": "IQoJb3JpZ2luX2VjE" + "".join(c.rng.choices(_BASE64, k=64)),
                "expiration": _console_date(c.when + timedelta(hours=1)),
            },
            "assumedRoleUser": {
                "assumedRoleId": f"{_stable_id('AROA', 21, target, role)}:{session}",
                "arn": f"arn:aws:sts::{target}:assumed-role/{role}/{session}",
            },
        },
        resources=[_resource(target, "AWS::IAM::Role", role_arn)],
    )


def _no_parameters(c: _Call) -> _Payload:
    return _Payload(None)


def _console_login(c: _Call) -> _Payload:
    return _Payload(
        request=None,
        response={"ConsoleLogin": "Success"},
        additional={
            "LoginTo": "https://console.aws.amazon.com/console/home?state=hashArgs%23",
            "MobileVersion": "No",
            "MFAUsed": c.rng.choice(("Yes", "No")),
        },
    )


def _kms(data_key: bool) -> Callable[[_Call], _Payload]:
    def build(c: _Call) -> _Payload:
        key_arn = _kms_key_arn(c.account, c.region, c.rng.randrange(3))
        context = {"aws:s3:arn": f"arn:aws:s3:::{_s3_bucket(c)}/{_s3_key(c)}"}
        request: dict[str, Any]
        if data_key:
            request = {"keyId": key_arn, "keySpec": "AES_256", "encryptionContext": context}
        else:
            request = {"encryptionAlgorithm": "SYMMETRIC_DEFAULT", "encryptionContext": context}
        return _Payload(request, resources=[_resource(c.account, "AWS::KMS::Key", key_arn)])

    return build


def _lambda_invoke(c: _Call) -> _Payload:
    arn = f"arn:aws:lambda:{c.region}:{c.account}:function:{c.rng.choice(_FUNCTIONS)}"
    return _Payload(
        request={
            "functionName": arn,
            "invocationType": c.rng.choice(("RequestResponse", "Event")),
        },
        resources=[_resource(c.account, "AWS::Lambda::Function", arn)],
        additional={"functionVersion": f"{arn}:$LATEST"},
    )


def _cloudtrail_lookup_events(c: _Call) -> _Payload:
    name = c.rng.choice(("ConsoleLogin", "CreateAccessKey", "TerminateInstances"))
    return _Payload(
        {
            "lookupAttributes": [{"attributeKey": "EventName", "attributeValue": name}],
            "maxResults": 50,
        }
    )


def _logs_put_log_events(c: _Call) -> _Payload:
    return _Payload(
        {
            "logGroupName": f"/aws/lambda/{c.rng.choice(_FUNCTIONS)}",
            "logStreamName": f"{c.when:%Y/%m/%d}/[$LATEST]{_hex(c.rng, 32)}",
        }
    )


def _dynamodb_item(c: _Call) -> _Payload:
    table = c.rng.choice(_TABLES)
    arn = f"arn:aws:dynamodb:{c.region}:{c.account}:table/{table}"
    return _Payload(
        request={"tableName": table, "key": {"pk": f"{table.upper()}#{c.rng.randrange(10**6)}"}},
        resources=[_resource(c.account, "AWS::DynamoDB::Table", arn)],
    )


_ACCESS_DENIED = ("AccessDenied", "User: {arn} is not authorized to perform: {action}")
_THROTTLED = ("ThrottlingException", "Rate exceeded")
_EC2_ERRORS = (
    ("Client.UnauthorizedOperation", "You are not authorized to perform this operation."),
    ("Client.RequestLimitExceeded", "Request limit exceeded."),
)
_S3_READ_ERRORS = (
    ("AccessDenied", "Access Denied"),
    ("NoSuchKey", "The specified key does not exist."),
)
_DYNAMODB_ERRORS = (
    (
        "ProvisionedThroughputExceededException",
        "The level of configured provisioned throughput for the table was exceeded.",
    ),
    ("ResourceNotFoundException", "Requested resource not found"),
)


# AWS marks these read-only too: they change nothing in the account.
_READ_ONLY_VERBS = ("Get", "Describe", "List", "Lookup")
_ALSO_READ_ONLY = frozenset({"AssumeRole", "Decrypt", "GenerateDataKey"})


@dataclass(frozen=True, kw_only=True)
class _EventSpec:
    """One real CloudTrail (eventSource, eventName) pair and how to fill its record."""

    source: str
    name: str
    weight: int
    build: Callable[[_Call], _Payload]
    data: bool = False  # a data event (object/item/invocation level), not management
    global_service: bool = False
    humans: bool = True  # called by IAM users, roles and root
    root: bool = True  # False where AWS refuses root credentials
    service_callers: tuple[str, ...] = ()  # AWS services that call it (AWSService identity)
    errors: tuple[tuple[str, str], ...] = (_ACCESS_DENIED, _THROTTLED)

    @property
    def read_only(self) -> bool:
        return self.name.startswith(_READ_ONLY_VERBS) or self.name in _ALSO_READ_ONLY


_EC2 = "ec2.amazonaws.com"
_S3 = "s3.amazonaws.com"
_IAM = "iam.amazonaws.com"
_STS = "sts.amazonaws.com"
_KMS = "kms.amazonaws.com"
_LAMBDA = "lambda.amazonaws.com"
_DYNAMODB = "dynamodb.amazonaws.com"

_CATALOGUE: tuple[_EventSpec, ...] = (
    _EventSpec(
        source=_EC2, name="RunInstances", weight=1, build=_ec2_run_instances, errors=_EC2_ERRORS
    ),
    _EventSpec(
        source=_EC2,
        name="DescribeInstances",
        weight=8,
        build=_ec2_describe_instances,
        service_callers=("autoscaling.amazonaws.com",),
        errors=_EC2_ERRORS,
    ),
    _EventSpec(
        source=_EC2,
        name="StopInstances",
        weight=1,
        build=_ec2_state_change((64, "stopping")),
        errors=_EC2_ERRORS,
    ),
    _EventSpec(
        source=_EC2,
        name="TerminateInstances",
        weight=1,
        build=_ec2_state_change((32, "shutting-down")),
        errors=_EC2_ERRORS,
    ),
    _EventSpec(
        source=_S3,
        name="GetObject",
        weight=12,
        build=_s3_object(upload=False, response=None),
        data=True,
        errors=_S3_READ_ERRORS,
    ),
    _EventSpec(
        source=_S3,
        name="PutObject",
        weight=8,
        build=_s3_object(upload=True, response={"x-amz-server-side-encryption": "aws:kms"}),
        data=True,
        service_callers=("cloudtrail.amazonaws.com",),
        errors=(
            ("AccessDenied", "Access Denied"),
            ("SlowDown", "Please reduce your request rate."),
        ),
    ),
    _EventSpec(
        source=_S3,
        name="DeleteObject",
        weight=2,
        build=_s3_object(upload=False, response=None),
        data=True,
        errors=_S3_READ_ERRORS,
    ),
    _EventSpec(
        source=_S3,
        name="ListBuckets",
        weight=3,
        build=_s3_list_buckets,
        errors=(("AccessDenied", "Access Denied"),),
    ),
    _EventSpec(
        source=_IAM,
        name="CreateUser",
        weight=1,
        build=_iam_create_user,
        global_service=True,
        errors=(_ACCESS_DENIED, ("EntityAlreadyExists", "The entity already exists.")),
    ),
    _EventSpec(
        source=_IAM,
        name="AttachRolePolicy",
        weight=1,
        build=_iam_attach_role_policy,
        global_service=True,
    ),
    _EventSpec(
        source=_IAM,
        name="CreateAccessKey",
        weight=1,
        build=_iam_create_access_key,
        global_service=True,
        errors=(_ACCESS_DENIED, ("LimitExceeded", "Cannot exceed quota for AccessKeysPerUser: 2")),
    ),
    _EventSpec(
        source=_STS,
        name="AssumeRole",
        weight=10,
        build=_sts_assume_role,
        root=False,
        service_callers=(_LAMBDA, _EC2, "ecs-tasks.amazonaws.com"),
    ),
    _EventSpec(
        source=_STS,
        name="GetCallerIdentity",
        weight=4,
        build=_no_parameters,
        errors=(_THROTTLED,),
    ),
    # Failed sign-ins look different (no errorCode); only successes are generated.
    _EventSpec(
        source="signin.amazonaws.com",
        name="ConsoleLogin",
        weight=3,
        build=_console_login,
        errors=(),
    ),
    _EventSpec(
        source=_KMS,
        name="Decrypt",
        weight=10,
        build=_kms(data_key=False),
        service_callers=(_S3, _LAMBDA, _DYNAMODB),
        errors=(("AccessDeniedException", "User: {arn} is not authorized to perform: {action}"),),
    ),
    _EventSpec(
        source=_KMS,
        name="GenerateDataKey",
        weight=6,
        build=_kms(data_key=True),
        service_callers=(_S3, _DYNAMODB),
        errors=(_THROTTLED,),
    ),
    _EventSpec(
        source=_LAMBDA,
        name="Invoke",
        weight=6,
        build=_lambda_invoke,
        data=True,
        service_callers=("apigateway.amazonaws.com", "events.amazonaws.com"),
        errors=(
            ("ResourceNotFoundException", "Function not found"),
            ("TooManyRequestsException", "Rate Exceeded."),
        ),
    ),
    _EventSpec(
        source="cloudtrail.amazonaws.com",
        name="LookupEvents",
        weight=2,
        build=_cloudtrail_lookup_events,
    ),
    _EventSpec(
        source="logs.amazonaws.com",
        name="PutLogEvents",
        weight=5,
        build=_logs_put_log_events,
        humans=False,
        service_callers=(_LAMBDA,),
        errors=(_THROTTLED,),
    ),
    _EventSpec(
        source=_DYNAMODB,
        name="GetItem",
        weight=6,
        build=_dynamodb_item,
        data=True,
        errors=_DYNAMODB_ERRORS,
    ),
    _EventSpec(
        source=_DYNAMODB,
        name="PutItem",
        weight=4,
        build=_dynamodb_item,
        data=True,
        errors=_DYNAMODB_ERRORS,
    ),
)


@cache
def _events_for(region: str) -> tuple[tuple[_EventSpec, ...], tuple[int, ...]]:
    """The catalogue as recorded in ``region`` (global services only in us-east-1), with
    cumulative weights for ``Random.choices``."""
    specs = tuple(s for s in _CATALOGUE if region == _GLOBAL_REGION or not s.global_service)
    return specs, tuple(accumulate(s.weight for s in specs))


# ------------------------------------------------------------------------------ records


@cache
def _identity_types(
    humans: bool, root: bool, services: bool
) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Identity types that may call an event, with cumulative weights."""
    permitted = {"IAMUser": humans, "AssumedRole": humans, "Root": humans and root}
    permitted["AWSService"] = services
    allowed = tuple(k for k in _IDENTITY_WEIGHTS if permitted[k])
    return allowed, tuple(accumulate(_IDENTITY_WEIGHTS[k] for k in allowed))


def _identity_type(rng: random.Random, spec: _EventSpec) -> str:
    allowed, cum_weights = _identity_types(spec.humans, spec.root, bool(spec.service_callers))
    return rng.choices(allowed, cum_weights=cum_weights)[0]


def _user_identity(
    rng: random.Random, kind: str, account: str, alias: str, when: datetime, caller: str
) -> dict[str, Any]:
    if kind == "IAMUser":
        user = rng.choice(_USERS)
        return {
            "type": "IAMUser",
            "principalId": _stable_id("AIDA", 21, account, user),
            "arn": f"arn:aws:iam::{account}:user/{user}",
            "accountId": account,
            "accessKeyId": _stable_id("AKIA", 20, account, user),
            "userName": user,
        }
    if kind == "Root":
        return {
            "type": "Root",
            "principalId": account,
            "arn": f"arn:aws:iam::{account}:root",
            "accountId": account,
            "accessKeyId": "ASIA" + _alnum(rng, 16),
            "userName": alias,
        }
    if kind == "AssumedRole":
        role, session = rng.choice(_ROLES), rng.choice(_SESSION_NAMES)
        role_id = _stable_id("AROA", 21, account, role)
        created = when - timedelta(seconds=rng.randrange(1, 3600))
        return {
            "type": "AssumedRole",
            "principalId": f"{role_id}:{session}",
            "arn": f"arn:aws:sts::{account}:assumed-role/{role}/{session}",
            "accountId": account,
            "accessKeyId": "ASIA" + _alnum(rng, 16),
            "sessionContext": {
                "sessionIssuer": {
                    "type": "Role",
                    "principalId": role_id,
                    "arn": f"arn:aws:iam::{account}:role/{role}",
                    "accountId": account,
                    "userName": role,
                },
                "webIdFederationData": {},
                "attributes": {
                    "creationDate": _event_time(created),
                    "mfaAuthenticated": rng.choice(("true", "false")),
                },
            },
        }
    # AWS itself acting on the account's behalf: AWS names the calling service only.
    return {"type": "AWSService", "accountId": account, "invokedBy": caller}


def _valid_record(
    rng: random.Random, account: str, alias: str, region: str, second: int
) -> dict[str, Any]:
    """One fully valid CloudTrail record, keys in the order AWS writes them."""
    specs, cum_weights = _events_for(region)
    spec = rng.choices(specs, cum_weights=cum_weights)[0]
    when = _EPOCH + timedelta(seconds=second)
    kind = _identity_type(rng, spec)
    caller = rng.choice(spec.service_callers) if kind == "AWSService" else ""
    identity = _user_identity(rng, kind, account, alias, when, caller)
    console = spec.name == "ConsoleLogin"
    request_id = _hex(rng, 16).upper() if spec.source == _S3 else _uuid(rng)
    payload = spec.build(_Call(rng, account, alias, region, when, request_id))

    if caller:
        source_ip, user_agent = caller, caller
    elif console:
        source_ip, user_agent = _ip_address(rng), rng.choice(_BROWSER_USER_AGENTS)
    else:
        source_ip, user_agent = _ip_address(rng), rng.choice(_API_USER_AGENTS)

    record: dict[str, Any] = {
        "eventVersion": "1.08",
        "userIdentity": identity,
        "eventTime": _event_time(when),
        "eventSource": spec.source,
        "eventName": spec.name,
        "awsRegion": region,
        "sourceIPAddress": source_ip,
        "userAgent": user_agent,
    }
    failed = bool(spec.errors) and rng.random() < _ERROR_RATE
    if failed:
        code, message = rng.choice(spec.errors)
        record["errorCode"] = code
        record["errorMessage"] = message.format(
            arn=identity.get("arn", caller), action=f"{spec.source.split('.')[0]}:{spec.name}"
        )
    record["requestParameters"] = payload.request
    record["responseElements"] = None if failed else payload.response
    if payload.additional is not None:
        record["additionalEventData"] = payload.additional
    record["requestID"] = request_id
    record["eventID"] = _uuid(rng)
    record["readOnly"] = spec.read_only
    if payload.resources:
        record["resources"] = payload.resources
    record["eventType"] = "AwsConsoleSignIn" if console else "AwsApiCall"
    record["managementEvent"] = not spec.data
    record["recipientAccountId"] = account
    record["eventCategory"] = "Data" if spec.data else "Management"
    if not caller and not console:
        record["tlsDetails"] = {
            "tlsVersion": "TLSv1.3",
            "cipherSuite": "TLS_AES_128_GCM_SHA256",
            "clientProvidedHostHeader": f"{spec.source.split('.')[0]}.{region}.amazonaws.com",
        }
    return record


def _corrupt_record(kind: CorruptKind, rng: random.Random, record: dict[str, Any]) -> Any:
    """``record`` broken in exactly one way, so the quarantine reason is unambiguous."""
    if kind is CorruptKind.MISSING_EVENT_ID:
        del record["eventID"]
    elif kind is CorruptKind.MISSING_EVENT_TIME:
        del record["eventTime"]
    elif kind is CorruptKind.BAD_EVENT_TIME:
        record["eventTime"] = rng.choice(_BAD_EVENT_TIMES)
    elif kind is CorruptKind.NOT_AN_OBJECT:
        return rng.choice(_NOT_AN_OBJECT)
    elif kind is CorruptKind.WRONG_TYPE:
        if rng.random() < 0.5:
            record["readOnly"] = "maybe"
        else:
            record["userIdentity"] = "root"
    else:
        raise AssertionError(f"not a record-level kind: {kind}")
    return record


# -------------------------------------------------------------------------------- files


def _to_json(document: Any) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=6, mtime=0)


def _digest_document(
    rng: random.Random, account: str, alias: str, region: str, first: datetime, last: datetime
) -> dict[str, Any]:
    """A CloudTrail digest file: valid JSON that lists log files but holds no Records."""
    bucket = f"{alias}-cloudtrail-logs"
    day = f"{first:%Y/%m/%d}"
    log_files = [
        {
            "s3Bucket": bucket,
            "s3Object": f"AWSLogs/{account}/CloudTrail/{region}/{day}/{account}_CloudTrail_"
            f"{region}_{first:%Y%m%dT%H%MZ}_{_alnum(rng, 16)}.json.gz",
            "hashValue": _hex(rng, 64),
            "hashAlgorithm": "SHA-256",
            "newestEventTime": _event_time(last),
            "oldestEventTime": _event_time(first),
        }
        for _ in range(rng.randint(1, 3))
    ]
    digest_prefix = f"AWSLogs/{account}/CloudTrail-Digest/{region}/{day}/{account}"
    return {
        "awsAccountId": account,
        "digestStartTime": _event_time(first),
        "digestEndTime": _event_time(last),
        "digestS3Bucket": bucket,
        "digestS3Object": f"{digest_prefix}_CloudTrail-Digest_{region}_{first:%Y%m%dT%H%M%SZ}"
        ".json.gz",
        "digestPublicKeyFingerprint": _hex(rng, 32),
        "digestSignatureAlgorithm": "SHA256withRSA",
        "newestEventTime": _event_time(last),
        "oldestEventTime": _event_time(first),
        "previousDigestS3Bucket": bucket,
        "previousDigestHashValue": _hex(rng, 64),
        "previousDigestHashAlgorithm": "SHA-256",
        "logFiles": log_files,
    }


def _not_json_text(rng: random.Random, document: bytes) -> bytes:
    """What a broken upstream leaves behind: an error page or a document cut short."""
    choice = rng.randrange(3)
    if choice == 0:
        return (
            "<!DOCTYPE html><html><head><title>503 Service Unavailable</title></head>"
            "<body><h1>Service Unavailable</h1><p>Request ID: "
            f"{_alnum(rng, 16)}</p></body></html>\n"
        ).encode()
    if choice == 1:
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
            "<Message>Please reduce your request rate.</Message>"
            f"<RequestId>{_alnum(rng, 16)}</RequestId></Error>"
        ).encode()
    return document[: len(document) // 2]


def _corrupt_file(
    kind: CorruptKind,
    rng: random.Random,
    document: bytes,
    account: str,
    alias: str,
    region: str,
    seconds: list[int],
) -> bytes:
    if kind is CorruptKind.TRUNCATED_GZIP:
        compressed = _gzip(document)
        return compressed[: len(compressed) * 6 // 10]
    if kind is CorruptKind.NOT_JSON:
        return _gzip(_not_json_text(rng, document))
    if kind is CorruptKind.NO_RECORDS:
        first = _EPOCH + timedelta(seconds=seconds[0])
        last = _EPOCH + timedelta(seconds=seconds[-1])
        return _gzip(_to_json(_digest_document(rng, account, alias, region, first, last)))
    raise AssertionError(f"not a file-level kind: {kind}")


def _write_atomically(path: Path, data: bytes) -> None:
    """Write via a hidden temp file + rename, so streaming readers never see partial files."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


# ------------------------------------------------------------------------- corruption


class _CorruptionPlan:
    """Decides, item by item, whether and how to corrupt (see the module docstring)."""

    def __init__(
        self,
        rng: random.Random,
        items: int,
        probability: float,
        kinds: tuple[CorruptKind, ...],
    ) -> None:
        self._rng = rng
        self._probability = probability
        self._kinds = kinds
        self._position = 0
        self._issued = 0
        floor = min(len(kinds), int(items * probability)) if probability > 0 else 0
        self._forced = frozenset(rng.sample(range(items), floor))

    def next(self) -> CorruptKind | None:
        position = self._position
        self._position += 1
        if self._probability == 0:
            return None
        if position not in self._forced and self._rng.random() >= self._probability:
            return None
        if self._issued < len(self._kinds):
            kind = self._kinds[self._issued]
        else:
            kind = self._rng.choice(self._kinds)
        self._issued += 1
        return kind


# ---------------------------------------------------------------------------- public


def _validate(
    files: int,
    records_per_file: int,
    corrupt_fraction: float,
    start: datetime,
    span: timedelta,
) -> None:
    if isinstance(files, bool) or not isinstance(files, int) or files < 0:
        raise ValueError(
            f"files must be an integer >= 0, got {files!r}: pass how many log files to write"
        )
    if isinstance(records_per_file, bool) or not isinstance(records_per_file, int):
        raise ValueError(f"records_per_file must be an integer >= 1, got {records_per_file!r}")
    if records_per_file < 1:
        raise ValueError(
            f"records_per_file must be >= 1, got {records_per_file}: "
            "a CloudTrail log file holds at least one record"
        )
    check_corruption_and_time(corrupt_fraction, start, span)


def _whole_seconds(start: datetime, span: timedelta) -> tuple[int, int]:
    """First epoch second >= start, and how many whole seconds lie in [start, start+span)."""
    microsecond = timedelta(microseconds=1)
    start_us = (start - _EPOCH) // microsecond
    end_us = start_us + span // microsecond
    first = -(-start_us // 1_000_000)
    count = -(-end_us // 1_000_000) - first
    if count < 1:
        raise ValueError(
            f"span must contain at least one whole second after start, got {span!r} "
            f"from {start.isoformat()}: lengthen span"
        )
    return first, count


def generate_cloudtrail(
    out_dir: Path,
    *,
    files: int,
    records_per_file: int,
    seed: int,
    corrupt_fraction: float = 0.0,
    start: datetime = datetime(2026, 11, 20, tzinfo=UTC),
    span: timedelta = timedelta(days=3),
    collect_ids: bool = True,
    on_file: Callable[[Path], None] | None = None,
) -> CloudTrailGenerationReport:
    """Write ``files`` CloudTrail log files under ``out_dir`` and report what they hold.

    Same arguments give byte-identical files. Each file is written atomically and
    ``on_file`` is called after each one, so a streaming reader (or a progress bar) can
    follow along. ``corrupt_fraction`` and the guarantees about corruption are described
    in the module docstring.
    """
    _validate(files, records_per_file, corrupt_fraction, start, span)
    first_second, seconds_in_span = _whole_seconds(start, span)
    rng = random.Random(seed)
    plan_rng = random.Random(rng.getrandbits(128))
    probability = corrupt_fraction / 2

    file_plan = _CorruptionPlan(plan_rng, files, probability, FILE_LEVEL_KINDS)
    file_kinds = [file_plan.next() for _ in range(files)]
    healthy_records = file_kinds.count(None) * records_per_file
    record_plan = _CorruptionPlan(plan_rng, healthy_records, probability, RECORD_LEVEL_KINDS)

    counts = dict.fromkeys(CorruptKind, 0)
    valid_records = 0
    valid_ids: set[str] = set()
    paths: list[str] = []
    names: set[str] = set()
    root = Path(out_dir)

    for file_kind in file_kinds:
        account, alias = rng.choices(_ACCOUNTS, weights=_ACCOUNT_WEIGHTS)[0]
        region = rng.choices(_REGIONS, weights=_REGION_WEIGHTS)[0]
        seconds = sorted(
            first_second + rng.randrange(seconds_in_span) for _ in range(records_per_file)
        )
        records: list[Any] = [_valid_record(rng, account, alias, region, s) for s in seconds]

        if file_kind is None:
            for index, record in enumerate(records):
                record_kind = record_plan.next()
                if record_kind is None:
                    valid_records += 1
                    if collect_ids:
                        valid_ids.add(record["eventID"])
                else:
                    counts[record_kind] += 1
                    records[index] = _corrupt_record(record_kind, rng, record)
            body = _gzip(_to_json({"Records": records}))
        else:
            counts[file_kind] += 1
            document = _to_json({"Records": records})
            body = _corrupt_file(file_kind, rng, document, account, alias, region, seconds)

        first = _EPOCH + timedelta(seconds=seconds[0])
        name = ""
        while not name or name in names:
            name = f"{account}_CloudTrail_{region}_{first:%Y%m%dT%H%MZ}_{_alnum(rng, 16)}.json.gz"
        names.add(name)
        path = root / "AWSLogs" / account / "CloudTrail" / region / f"{first:%Y/%m/%d}" / name
        _write_atomically(path, body)
        paths.append(str(path))
        if on_file is not None:
            on_file(path)

    by_kind = {kind.value: n for kind, n in counts.items() if n}
    return CloudTrailGenerationReport(
        files_written=len(paths),
        valid_records=valid_records,
        quarantine_rows=sum(by_kind.values()),
        by_kind=by_kind,
        paths=tuple(paths),
        valid_event_ids=frozenset(valid_ids),
    )
