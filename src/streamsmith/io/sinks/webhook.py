"""The webhook sink: each row POSTed as JSON (``streamsmith.io.webhook``), at least once;
rows not delivered land in the lake table ``table`` with their error."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from streamsmith.config import ConfValue, HttpUrlSecret
from streamsmith.io.lake import kept_format
from streamsmith.io.sinks.base import (
    LakeBackedSink,
    LakeTableOptions,
    QueryArgs,
    SinkContext,
    UpgradeRules,
)
from streamsmith.io.webhook import WebhookTarget, start_webhook_stream


class WebhookOptions(LakeTableOptions):
    """``url``: where to POST (a secret); ``table``: the lake table of failed deliveries;
    ``options``: ``timeout``, ``retries``, ``deadline`` (the most a batch waits)."""

    url: HttpUrlSecret
    options: dict[str, ConfValue] = Field(default_factory=dict)


class WebhookSink(LakeBackedSink):
    """Rows POSTed one by one with bounded retries; failures kept in the lake."""

    format: ClassVar[str] = "webhook"
    kind: ClassVar[str] = "webhook"
    Options = WebhookOptions
    output_modes: ClassVar[tuple[Literal["append", "update", "complete"], ...]] = (
        "append",
        "update",
    )
    upgrade = UpgradeRules("foreach")
    options: WebhookOptions

    def __init__(self, options: WebhookOptions, context: SinkContext) -> None:
        super().__init__(options, context)
        # Delivery options are checked when the plan is built, not at the first batch.
        self.delivery = WebhookTarget.from_options(
            options.url.get_secret_value(), dict(options.options)
        )

    def describe(self) -> str:
        from urllib.parse import urlsplit

        where = urlsplit(self.options.url.get_secret_value())
        return (
            f"webhook {where.scheme}://{where.hostname}:{where.port or ''} (URL redacted; "
            f"failed deliveries in {kept_format(self.lake_path, 'delta')} {self.lake_path})"
        )

    def secrets(self) -> list[str]:
        return [self.options.url.get_secret_value()]

    def start(self, spark: SparkSession, frame: DataFrame, query: QueryArgs) -> StreamingQuery:
        return start_webhook_stream(
            frame,
            name=query.name,
            checkpoint=query.checkpoint,
            trigger=query.trigger,
            target=self.delivery,
            undelivered=self.lake_path,
        )


SINK = WebhookSink
