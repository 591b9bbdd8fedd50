"""What Lakeflow's ``pyspark.pipelines`` API takes beyond PySpark 4.2's, for SDP projects
run by streamsmith: AUTO CDC flows of SCD type 1 and 2 (run by streamsmith's change data
capture, ``streamsmith.io.cdc``: exactly once, whatever order events arrive in) and
append flows that run ``once``.

PySpark 4.2's ``dp.create_auto_cdc_flow`` builds Spark Connect columns (it needs the
``grpc`` client libraries) and accepts SCD type 1 only; its ``dp.append_flow`` has no
``once``. Lakeflow's signatures are supersets of them, so while streamsmith imports a
project's files, ``pyspark.pipelines`` answers ``create_auto_cdc_flow`` and
``append_flow`` with the functions here (:func:`lakeflow_names`): a project written for
SDP or for Lakeflow runs unchanged. An AUTO CDC flow is an :class:`AutoCdc`, which the
loader turns into a ``cdc:`` block over the source's columns (:meth:`AutoCdc.cdc_block`);
a once flow a :class:`OnceFlow`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from pyspark.pipelines.flow import Flow, QueryFunction
from pyspark.pipelines.graph_element_registry import get_active_graph_element_registry
from pyspark.pipelines.source_code_location import (
    SourceCodeLocation,
    get_caller_source_code_location,
)
from pyspark.sql import Column, DataFrame

from streamsmith.sdp.expectations import DECORATORS
from streamsmith.spark.jvm import column_sql
from streamsmith.transforms.cdc import ChangeRules, changes, table_schema


@dataclass(frozen=True)
class AutoCdc:
    """An AUTO CDC flow: change events streamed from ``source``, applied by key to the
    streaming table ``target`` (columns and conditions as SQL text)."""

    name: str
    target: str
    source: str
    keys: tuple[str, ...]
    sequence_by: str
    source_code_location: SourceCodeLocation
    apply_as_deletes: str | None = None
    column_list: tuple[str, ...] | None = None
    except_column_list: tuple[str, ...] | None = None
    scd_type: Literal[1, 2] = 1
    track_history_column_list: tuple[str, ...] | None = None
    track_history_except_column_list: tuple[str, ...] | None = None
    ignore_null_updates: bool = False
    apply_as_truncates: str | None = None

    def cdc_block(self, columns: Sequence[str]) -> dict[str, Any]:
        """streamsmith's ``cdc:`` spec for events with ``columns``: ``column_list`` and
        ``track_history_except_column_list`` become the columns they leave out or in."""
        excepted = tuple(self.except_column_list or ())
        if self.column_list is not None:
            excepted = tuple(c for c in columns if c not in self.column_list)
        block: dict[str, Any] = {
            "keys": list(self.keys),
            "sequence_by": self.sequence_by,
            "scd_type": self.scd_type,
            "except_columns": list(excepted),
        }
        if self.apply_as_deletes is not None:
            block["apply_as_deletes"] = self.apply_as_deletes
        if self.ignore_null_updates:
            block["ignore_null_updates"] = True
        if self.apply_as_truncates is not None:
            block["apply_as_truncates"] = self.apply_as_truncates
        tracked = self.track_history_column_list
        if self.track_history_except_column_list is not None:
            left_out = {*self.keys, *excepted, *self.track_history_except_column_list}
            tracked = tuple(c for c in columns if c not in left_out and c != self.sequence_by)
        if tracked is not None:
            block["track_history_columns"] = list(tracked)
        return block

    def rules(self, columns: Sequence[str]) -> ChangeRules:
        """The rules over events with ``columns`` (ValueError naming what is missing)."""
        block = self.cdc_block(columns)
        rules = ChangeRules(
            tuple(block["keys"]), self.sequence_by, self.apply_as_deletes,
            tuple(block["except_columns"]), self.scd_type,
            tuple(block["track_history_columns"]) if "track_history_columns" in block else None,
            ignore_null_updates=self.ignore_null_updates,
            apply_as_truncates=self.apply_as_truncates,
        )  # fmt: skip
        return rules.for_columns(columns)

    def table_frame(self, events: DataFrame) -> DataFrame:
        """An empty frame shaped as the target table the events build (what a flow
        reading the target sees before any run has written it)."""
        typed = changes(events, self.rules(events.columns)).schema
        return events.sparkSession.createDataFrame([], table_schema(typed, self.scd_type))


ColumnsArg = Sequence[str | Column]


def auto_cdc(
    name: str,
    target: str,
    source: str,
    keys: tuple[str, ...],
    sequence_by: str,
    location: SourceCodeLocation,
    *,
    apply_as_deletes: str | None = None,
    column_list: tuple[str, ...] | None = None,
    except_column_list: tuple[str, ...] | None = None,
    scd_type: int | str = 1,
    track_history_column_list: tuple[str, ...] | None = None,
    track_history_except_column_list: tuple[str, ...] | None = None,
    ignore_null_updates: bool = False,
    apply_as_truncates: str | None = None,
) -> AutoCdc:
    """An :class:`AutoCdc`, its options checked as Lakeflow checks them (ValueError)."""
    if str(scd_type) not in ("1", "2"):
        raise ValueError(f"the SCD type is 1 or 2, not {scd_type!r}")
    if column_list is not None and except_column_list is not None:
        raise ValueError("give column_list or except_column_list, not both")
    if track_history_column_list is not None and track_history_except_column_list is not None:
        raise ValueError(
            "give track_history_column_list or track_history_except_column_list, not both"
        )
    tracks = track_history_column_list is not None or track_history_except_column_list is not None
    if tracks and str(scd_type) != "2":
        raise ValueError("tracking history is for SCD type 2")
    if not keys:
        raise ValueError("an AUTO CDC flow needs at least one key")
    if apply_as_truncates is not None and str(scd_type) != "1":
        raise ValueError(
            f"AUTO CDC flow {name!r}: apply_as_truncates (APPLY AS TRUNCATE WHEN) is for SCD "
            "type 1 only, as in "
            "Lakeflow (an SCD type 2 table keeps its history)"
        )
    return AutoCdc(
        name, target, source, keys, sequence_by, location, apply_as_deletes, column_list,
        except_column_list, 1 if str(scd_type) == "1" else 2, track_history_column_list,
        track_history_except_column_list, bool(ignore_null_updates), apply_as_truncates,
    )  # fmt: skip


def create_auto_cdc_flow(
    target: str,
    source: str,
    keys: ColumnsArg,
    sequence_by: str | Column,
    ignore_null_updates: bool = False,
    apply_as_deletes: str | Column | None = None,
    apply_as_truncates: str | Column | None = None,
    column_list: ColumnsArg | None = None,
    except_column_list: ColumnsArg | None = None,
    stored_as_scd_type: Literal[1, 2, "1", "2"] = 1,
    track_history_column_list: ColumnsArg | None = None,
    track_history_except_column_list: ColumnsArg | None = None,
    name: str | None = None,
    once: bool = False,
) -> None:
    """Lakeflow's ``create_auto_cdc_flow``: apply the change events streamed from
    ``source`` to the streaming table ``target`` by ``keys``, ordered by ``sequence_by``,
    as SCD type 1 (the latest row per key) or 2 (every version, with ``__START_AT`` and
    ``__END_AT``). Columns are names or ``F.col``/``F.expr`` columns; conditions SQL text
    or ``F.expr`` columns. ``ignore_null_updates=True``: an update's null columns keep the
    key's values; ``apply_as_truncates`` (SCD type 1): the events that empty the table.
    ``once`` is refused: streamsmith does not run it yet.

    Example::

        dp.create_streaming_table("customers")
        dp.create_auto_cdc_flow(
            target="customers", source="customer_changes", keys=["id"],
            sequence_by="seq", apply_as_deletes="op = 'DELETE'",
            except_column_list=["op", "seq"], stored_as_scd_type=2,
        )
    """
    if once:
        raise ValueError("create_auto_cdc_flow(once=...) is not supported by streamsmith yet")
    flow = auto_cdc(
        name or target, target, source, _names(keys), _sql(sequence_by),
        get_caller_source_code_location(stacklevel=1),
        apply_as_deletes=None if apply_as_deletes is None else _sql(apply_as_deletes),
        column_list=_optional_names(column_list),
        except_column_list=_optional_names(except_column_list),
        scd_type=stored_as_scd_type,
        track_history_column_list=_optional_names(track_history_column_list),
        track_history_except_column_list=_optional_names(track_history_except_column_list),
        ignore_null_updates=ignore_null_updates,
        apply_as_truncates=None if apply_as_truncates is None else _sql(apply_as_truncates),
    )  # fmt: skip
    get_active_graph_element_registry().register_auto_cdc_flow(flow)  # type: ignore[arg-type]


@dataclass(frozen=True)
class OnceFlow(Flow):
    """An append flow that runs once (Lakeflow's ``once=True``, SQL's ``INSERT INTO
    ONCE``): a backfill, appended in the first run and not again until a full refresh."""


def append_flow(
    *,
    target: str,
    name: str | None = None,
    spark_conf: dict[str, str] | None = None,
    comment: str | None = None,
    once: bool = False,
) -> Callable[[QueryFunction], None]:
    """Lakeflow's ``append_flow``: PySpark's, plus ``comment`` (taken, not kept) and
    ``once`` (see :class:`OnceFlow`; its function reads in batch, ``spark.read``)."""
    location = get_caller_source_code_location(stacklevel=1)

    def register(func: QueryFunction) -> None:
        kind = OnceFlow if once else Flow
        flow = kind(name or func.__name__, target, dict(spark_conf or {}), location, func)
        get_active_graph_element_registry().register_flow(flow)

    return register


@contextmanager
def lakeflow_names() -> Iterator[None]:
    """Within, ``pyspark.pipelines.create_auto_cdc_flow`` and ``append_flow`` are this
    module's, and it has Lakeflow's expectation decorators (see the module docstring and
    :mod:`streamsmith.sdp.expectations`)."""
    import pyspark.pipelines as dp

    ours: dict[str, Any] = {
        "create_auto_cdc_flow": create_auto_cdc_flow, "append_flow": append_flow, **DECORATORS,
    }  # fmt: skip
    own = {name: getattr(dp, name, None) for name in ours}
    for name, value in ours.items():
        setattr(dp, name, value)
    try:
        yield
    finally:
        for name, value in own.items():
            if value is None:
                delattr(dp, name)
            else:
                setattr(dp, name, value)


def _sql(value: str | Column) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Column):
        text = column_sql(value)
        if text is not None:
            return text
    raise TypeError(
        f"give a SQL string, F.col(name) or F.expr(sql), not {value!r} "
        "(streamsmith applies CDC conditions as SQL)"
    )


def _names(columns: ColumnsArg) -> tuple[str, ...]:
    if isinstance(columns, str):
        raise TypeError(f"give a list of columns, not the string {columns!r}")
    return tuple(_sql(c).strip("`") for c in columns)


def _optional_names(columns: ColumnsArg | None) -> tuple[str, ...] | None:
    return None if columns is None else _names(columns)
