"""The security platform's transforms: structured logs, DHCP attribution and alert rules.

All pure: frames in, a frame out, the same code for a stream and a batch job.
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamsmith.config import parse_duration
from streamsmith.ml.anomaly import FEATURES, MODEL_NAME, current_model, flagged
from streamsmith.schemas.security import (
    ALERT_SCHEMA,
    AUTH_RESULTS,
    AUTH_SCHEMA,
    DHCP_ACTIONS,
    DHCP_SCHEMA,
    FLOW_SCHEMA,
)
from streamsmith.stateful.detection import Alert, DeviceWatch, FailedLogins, alert_frame
from streamsmith.stateful.leases import LEASE_OUTPUT, LeaseTracker
from streamsmith.transforms.events import WINDOW_END, WINDOW_START, flatten_window, parse_events

EVENT_TIME = "event_time"


def auth_events(source: DataFrame) -> DataFrame:
    """Typed authentication events, tagged for quarantine."""
    return parse_events(
        source,
        AUTH_SCHEMA,
        required=("event_id", EVENT_TIME, "user", "src_ip", "result"),
        rules=((~F.col("result").isin(*AUTH_RESULTS), "result is not success or failure"),),
    )


def dhcp_events(source: DataFrame) -> DataFrame:
    """Typed DHCP events, tagged for quarantine; assign and renew need a lease length."""
    leased = F.col("action").isin("assign", "renew")
    return parse_events(
        source,
        DHCP_SCHEMA,
        required=("event_id", EVENT_TIME, "ip", "mac", "action"),
        rules=(
            (~F.col("action").isin(*DHCP_ACTIONS), "action is not assign, renew or release"),
            (leased & ~(F.col("lease_seconds") > 0), "assign or renew without a positive lease"),
        ),
    )


def flow_events(source: DataFrame) -> DataFrame:
    """Typed network flow records, tagged for quarantine."""
    return parse_events(
        source,
        FLOW_SCHEMA,
        required=("event_id", EVENT_TIME, "src_ip", "dst_ip", "bytes"),
        rules=((F.col("bytes") < 0, "bytes is negative"),),
    )


def dated(events: DataFrame) -> DataFrame:
    """Events with the ``date`` their table is partitioned by."""
    return events.withColumn("date", F.to_date(EVENT_TIME))


def _plain_time(column: str) -> Column:
    """The same timestamp without the event-time mark Spark puts on a watermarked
    column: a query may carry only one event-time column past a join."""
    return F.timestamp_micros(F.unix_micros(column))


def attributed_logins(
    auth: DataFrame,
    dhcp: DataFrame,
    assets: DataFrame,
    *,
    delay: str = "5 minutes",
    max_lease: str = "24 hours",
) -> DataFrame:
    """Each authentication event with the device that held its source IP at that time
    (a stream-stream join) and that device's owner from the inventory (stream-static).

    A DHCP assign or renew at ``t`` with lease ``L`` covers ``[t, t + L)``; a renewal
    overlaps the lease it extends, so matches are deduplicated per event and device. An
    IP no lease covers (an outside address) keeps null device columns: the left side of
    an outer join, emitted once the watermark shows no lease can still match.
    ``max_lease`` bounds how long a lease waits in state for events (Spark needs a
    constant bound, the lease length is a column); leases may not be longer.
    """
    leases = (
        dhcp.filter(F.col("action").isin("assign", "renew"))
        .select(
            F.col("ip").alias("lease_ip"),
            "mac",
            "hostname",
            F.col(EVENT_TIME).alias("lease_time"),
            "lease_seconds",
        )
        .withWatermark("lease_time", delay)
    )
    covers = (
        (F.col("src_ip") == F.col("lease_ip"))
        & (F.col("lease_time") <= F.col(EVENT_TIME))
        & (F.col(EVENT_TIME) < F.col("lease_time") + F.make_interval(secs=F.col("lease_seconds")))
        & (
            F.col(EVENT_TIME)
            <= F.col("lease_time") + F.expr(f"INTERVAL {_seconds(max_lease)} SECONDS")
        )
    )
    joined = (
        auth.withWatermark(EVENT_TIME, delay)
        .join(leases, covers, "leftOuter")
        .withColumn("lease_start", _plain_time("lease_time"))
        .drop("lease_time", "lease_ip", "lease_seconds")
        .dropDuplicates(["event_id", "mac", EVENT_TIME])
    )
    inventory = assets.select("mac", "owner", "team", "criticality")
    return dated(joined.join(inventory, "mac", "left"))


def security_alerts(
    auth: DataFrame,
    dhcp: DataFrame,
    assets: DataFrame,
    flows: DataFrame | None = None,
    models: dict[str, str] | None = None,
    *,
    delay: str = "5 minutes",
    anomaly_window: str = "10 minutes",
    threshold: int = 10,
    window: str = "5 minutes",
    cooldown: str = "30 minutes",
    silence: str = "25 minutes",
    close_at_end: bool = False,
) -> DataFrame:
    """Alerts of every rule (see ``streamsmith.stateful.detection``), one schema; with
    ``flows`` and a ``secops-anomaly`` model path, also hosts whose traffic windows the
    model scores as anomalous. ``close_at_end``: the input is all there is (a batch
    run), so the rules' timers fire at its end instead of waiting for later events."""
    batch = close_at_end
    # Every login goes to the rule, which skips successes: filtering first would not do,
    # since Spark pushes a filter below the watermark, whose event time would then follow
    # the failures only and hold back every other rule in this query (a query's
    # watermark is the minimum over its inputs).
    logins = auth.withWatermark(EVENT_TIME, delay).withColumn(
        "failed", F.col("result") == "failure"
    )
    by_entity = logins.select(
        F.concat(F.lit("user:"), "user").alias("entity"),
        EVENT_TIME,
        F.col("src_ip").alias("other"),
        "failed",
    ).unionByName(
        logins.select(
            F.concat(F.lit("src_ip:"), "src_ip").alias("entity"),
            EVENT_TIME,
            F.col("user").alias("other"),
            "failed",
        )
    )
    brute_force = by_entity.groupBy("entity").transformWithStateInPandas(
        FailedLogins(threshold, _millis(window), _millis(cooldown), close_at_end=batch),
        ALERT_SCHEMA,
        outputMode="Append",
        timeMode="EventTime",
    )
    known = assets.select("mac", F.lit(True).alias("known")).distinct()
    devices = dhcp.join(known, "mac", "left").select(
        "mac",
        EVENT_TIME,
        "action",
        "ip",
        "hostname",
        F.coalesce("known", F.lit(False)).alias("known"),
    )
    if batch:
        devices = with_horizon(devices, delay)
    watched = (
        devices.withWatermark(EVENT_TIME, delay)
        .groupBy("mac")
        .transformWithStateInPandas(
            DeviceWatch(_millis(silence), close_at_end=batch),
            ALERT_SCHEMA,
            outputMode="Append",
            timeMode="EventTime",
        )
    )
    alerts = brute_force.unionByName(watched)
    model = (models or {}).get(MODEL_NAME)
    if flows is not None and model is not None:
        windows = host_windows(flows, anomaly_window, delay)
        alerts = alerts.unionByName(anomaly_alerts(windows, model))
    return alerts


INTERNAL_NETWORK = "10."  # the office's addresses (10.0.0.0/8): any other is outside


def outside_logins(auth: DataFrame) -> DataFrame:
    """One ``outside_login`` alert per login attempt from an address outside the office
    network, as it happens: a stateless rule (a filter and a projection), so it runs in
    Spark's Real-time Mode. A failed attempt is ``medium``, a successful one ``high``.
    The id is the stateful rules' (rule, entity, first time), so a replay re-sends it."""
    outside = auth.where(~F.col("src_ip").startswith(INTERNAL_NETWORK))
    entity = F.concat(F.lit("ip:"), F.col("src_ip"))
    first_ms = F.unix_millis(F.col(EVENT_TIME)).cast("string")
    alert_id = F.substring(
        F.sha2(F.concat_ws("|", F.lit("outside_login"), entity, first_ms), 256), 1, 24
    )
    evidence = F.to_json(F.struct("event_id", "user", "result", "method"))
    severity = F.when(F.col("result") == "success", "high").otherwise("medium")
    alerts = outside.select(
        alert_id.alias("alert_id"),
        F.lit("outside_login").alias("rule"),
        severity.alias("severity"),
        entity.alias("entity"),
        F.col(EVENT_TIME).alias(WINDOW_START),
        F.col(EVENT_TIME).alias(WINDOW_END),
        evidence.alias("evidence"),
        F.col(EVENT_TIME).alias("first_seen"),
        F.col(EVENT_TIME).alias("last_seen"),
    )
    return alert_messages(alerts)


def alert_rows(alerts: DataFrame) -> DataFrame:
    """The alerts as stored (lineage columns of the table stream dropped)."""
    return alerts.select(*ALERT_SCHEMA.fieldNames())


def alert_messages(alerts: DataFrame) -> DataFrame:
    """Alerts as Kafka records: key ``alert_id``, value the alert as JSON. A replayed
    batch re-sends the same keys, which consumers (and compacted topics) collapse."""
    rows = alert_rows(alerts)
    return rows.select(
        F.col("alert_id").alias("key"), F.to_json(F.struct(*rows.columns)).alias("value")
    )


def lease_history(
    dhcp: DataFrame, delay: str = "5 minutes", *, close_at_end: bool = False
) -> DataFrame:
    """Closed DHCP leases per IP with why they ended (``streamsmith.stateful.leases``);
    ``close_at_end``: the input is all there is (a batch run), so leases still open at
    its end are closed as a stream's timers would close them."""
    batch = close_at_end
    events = dhcp.select("ip", EVENT_TIME, "action", "mac", "hostname", "lease_seconds")
    if batch:
        events = with_horizon(events, delay)
    return (
        events.withWatermark(EVENT_TIME, delay)
        .groupBy("ip")
        .transformWithStateInPandas(
            LeaseTracker(close_at_end=batch),
            LEASE_OUTPUT,
            outputMode="Append",
            timeMode="EventTime",
        )
    )


def with_horizon(events: DataFrame, delay: str) -> DataFrame:
    """A batch frame with ``horizon``: its last event time less the delay, the point a
    stream's watermark reaches over the same input. Processors use it in place of the
    timers a batch job does not have."""
    latest = events.agg(F.max(EVENT_TIME).alias("_latest"))
    horizon = F.col("_latest") - F.expr(f"INTERVAL {_seconds(delay)} SECONDS")
    return events.crossJoin(latest).withColumn("horizon", horizon).drop("_latest")


def host_windows(
    flows: DataFrame, window: str = "10 minutes", delay: str = "5 minutes"
) -> DataFrame:
    """Each host's traffic per tumbling window: flows, bytes, distinct destinations and
    ports (the anomaly model's features). A stream emits a window once the watermark
    has closed it."""
    return flatten_window(
        flows.withWatermark(EVENT_TIME, delay)
        .groupBy(F.window(EVENT_TIME, window), "src_ip")
        .agg(
            F.count(F.lit(1)).alias("flows"),
            F.sum("bytes").alias("bytes"),
            F.size(F.collect_set("dst_ip")).alias("destinations"),
            F.size(F.collect_set("dst_port")).alias("ports"),
        )
    )


def anomaly_alerts(windows: DataFrame, model_path: str) -> DataFrame:
    """Host windows the current anomaly model scores above its threshold, as alerts.

    The model is read in the Python workers from ``model_path`` and read again when the
    file changes, so retraining takes effect from the next micro-batch; with no model
    yet, nothing is flagged.
    """

    def score(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            model = current_model(model_path)
            hits, scores = flagged(batch, model)
            alerts = []
            for (_, row), value in zip(hits.iterrows(), scores, strict=True):
                start, end = (int(pd.Timestamp(row[c]).timestamp() * 1000)
                              for c in (WINDOW_START, WINDOW_END))  # fmt: skip
                evidence = {
                    "score": round(value, 3),
                    "threshold": round(model.threshold, 3) if model else None,
                    "model": model.version if model else None,
                    **{name: int(row[name]) for name in FEATURES},
                }
                alerts.append(Alert("anomaly", "medium", f"src_ip:{row['src_ip']}", start,
                                    end, evidence, start, end))  # fmt: skip
            yield alert_frame(alerts)

    return windows.mapInPandas(score, ALERT_SCHEMA)


# Reports: the same pure transforms over a day of the lake (or over a stream).


def failed_logins_by_user(auth: DataFrame) -> DataFrame:
    """Failed logins per user: how many, from how many addresses, first and last."""
    return (
        auth.filter(F.col("result") == "failure")
        .groupBy("user")
        .agg(
            F.count(F.lit(1)).alias("failures"),
            F.countDistinct("src_ip").alias("sources"),
            F.min(EVENT_TIME).alias("first_failure"),
            F.max(EVENT_TIME).alias("last_failure"),
        )
    )


def failed_logins_by_hour(auth: DataFrame) -> DataFrame:
    """Failed logins per hour of the day, every hour present (zero when none)."""
    hours = auth.sparkSession.range(24).select(F.col("id").cast("int").alias("hour"))
    failures = (
        auth.filter(F.col("result") == "failure")
        .groupBy(F.hour(EVENT_TIME).alias("hour"))
        .agg(F.count(F.lit(1)).alias("failures"))
    )
    return hours.join(failures, "hour", "left").fillna(0, ["failures"]).orderBy("hour")


def top_talkers(flows: DataFrame, limit: int = 10) -> DataFrame:
    """The source addresses that sent the most bytes."""
    return (
        flows.groupBy("src_ip")
        .agg(
            F.sum("bytes").alias("bytes"),
            F.count(F.lit(1)).alias("flows"),
            F.countDistinct("dst_ip").alias("destinations"),
            F.countDistinct("dst_port").alias("ports"),
        )
        .orderBy(F.desc("bytes"), "src_ip")
        .limit(limit)
    )


def alerts_by_rule(alerts: DataFrame) -> DataFrame:
    """Alerts per rule and severity, with the entities they name."""
    return (
        alerts.groupBy("rule", "severity")
        .agg(
            F.count(F.lit(1)).alias("alerts"),
            F.concat_ws(", ", F.sort_array(F.collect_set("entity"))).alias("entities"),
        )
        .orderBy("rule")
    )


def _seconds(duration: str) -> int:
    return int(parse_duration(duration))


def _millis(duration: str) -> int:
    return int(parse_duration(duration) * 1000)
