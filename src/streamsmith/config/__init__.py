"""The pipeline spec: a strict, typed YAML document that configures one app.

Every app ships a default spec, so ``streamsmith run cloudtrail`` works out of the box.
Users layer YAML files (``-f spec.yaml``) and single values (``--set dotted.key=value``)
on top; the merged result is validated by frozen models that reject unknown keys and
say which file (or ``--set``) the offending key came from.

``durations`` (durations, triggers, schedules), ``models`` (the spec's sections, with
``operations`` and ``maintenance`` for theirs) and ``loading`` (layering and validating)
are re-exported here: import from
``streamsmith.config``.
"""

from __future__ import annotations

from streamsmith.config.base import (
    ConfValue,
    StrictModel,
)
from streamsmith.config.durations import (
    Trigger,
    check_schedule,
    parse_duration,
    parse_trigger,
    spark_duration,
)
from streamsmith.config.loading import (
    deep_merge,
    load_spec,
    load_spec_file,
    read_spec_yaml,
)
from streamsmith.config.maintenance import (
    AFTER_RUN,
    MaintenanceSpec,
    MaterializedViewSpec,
)
from streamsmith.config.models import (
    FILE_FORMATS,
    INFER,
    STOPPING,
    TAGGING,
    CdcSpec,
    EventTimeSpec,
    ExpectAction,
    ExpectationSpec,
    FlowSpec,
    KafkaSpec,
    LibraryGlob,
    LibrarySpec,
    OutputMode,
    PipelineSpec,
    PostgresSpec,
    SinkSpec,
    SourceSpec,
    SparkSpec,
    is_secret_key,
    masked_options,
    parser_options,
)
from streamsmith.config.operations import (
    AlertRules,
    HttpUrlSecret,
    MonitorSpec,
    NotifyEvent,
    NotifySpec,
    SmtpSpec,
    SupervisorSpec,
)

__all__ = [
    "AFTER_RUN",
    "FILE_FORMATS",
    "INFER",
    "STOPPING",
    "TAGGING",
    "AlertRules",
    "CdcSpec",
    "ConfValue",
    "EventTimeSpec",
    "ExpectAction",
    "ExpectationSpec",
    "FlowSpec",
    "HttpUrlSecret",
    "KafkaSpec",
    "LibraryGlob",
    "LibrarySpec",
    "MaintenanceSpec",
    "MaterializedViewSpec",
    "MonitorSpec",
    "NotifyEvent",
    "NotifySpec",
    "OutputMode",
    "PipelineSpec",
    "PostgresSpec",
    "SinkSpec",
    "SmtpSpec",
    "SourceSpec",
    "SparkSpec",
    "StrictModel",
    "SupervisorSpec",
    "Trigger",
    "check_schedule",
    "deep_merge",
    "is_secret_key",
    "load_spec",
    "load_spec_file",
    "masked_options",
    "parse_duration",
    "parse_trigger",
    "parser_options",
    "read_spec_yaml",
    "spark_duration",
]
