"""Outputs whose rows the commit hands to user code: windows over batches, state updaters (partitionPersist) and
committers (a sink's rows, in txid order).

Both stage the batch's rows as JSON arrays from the executors, each under a unique increasing sequence number
(``monotonically_increasing_id``: partition order, then row order), so the commit reads them back in the batch's
order; the commit appends them to the window store or passes them to the updater (txdag.commit.apply).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, NumericType, TimestampNTZType, TimestampType

from txdag.errors import ConfigError
from txdag.spark.outputs import StageContext, json_value, map_state
from txdag.spark.stage import write_fields
from txdag.staging.format import PERSIST, SINK, WINDOW, OutputSpec
from txdag.topology.definition import Sink, State
from txdag.topology.refs import ref_of
from txdag.windows.rules import WindowSpec, spec_to_dict


def encode_row(value: dict[str, Any]) -> str:
    return json.dumps(list(value.values()), default=json_value, separators=(",", ":"), ensure_ascii=False)


def stage_rows(ctx: StageContext, frame: DataFrame) -> int:
    """Stage every row of ``frame`` as a JSON array of its columns, keyed by a sequence number in batch order."""
    rows = frame.select(F.monotonically_increasing_id().cast("string").alias("field"),
                        F.struct(*frame.columns).alias("row"))
    return write_fields(rows, ctx.client_spec, ctx.key, ctx.tx, ctx.topology, ctx.state_where, encode_row)


def _global_state(ctx: StageContext, what: str) -> State:
    state = map_state(ctx, what)
    if state.key_fields != 0:
        raise ConfigError(f"{ctx.where}: a {what} keeps its latest result in state {state.name!r} as one value: "
                          f"declare it with key_fields=0")
    return state


def _columns(ctx: StageContext, frame: DataFrame, names: tuple[str, ...], what: str) -> None:
    missing = [n for n in names if n not in frame.columns]
    if missing:
        raise ConfigError(f"{ctx.where}: {what} names column(s) {missing} that the DataFrame of state "
                          f"{ctx.state.name!r} does not have (columns: {frame.columns})")


@dataclass(frozen=True)
class WindowOutput:
    """The batch's rows into a window over batches; the windows it closes are aggregated at the commit."""

    frame: DataFrame
    window: WindowSpec
    aggregator: Any
    group_by: tuple[str, ...] = ()
    timestamp: str | None = None
    top: int | None = None
    new_values: bool = False
    fields: tuple[str, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        rest = [c for c in self.frame.columns if c not in self.group_by and c != self.timestamp]
        object.__setattr__(self, "fields", (*self.group_by, *rest))

    def check(self, ctx: StageContext) -> None:
        from txdag.contracts import AGGREGATOR_KINDS

        _global_state(ctx, "window")
        _columns(ctx, self.frame, (*self.group_by, *([self.timestamp] if self.timestamp else [])), "the window")
        if not isinstance(self.aggregator, AGGREGATOR_KINDS):
            raise ConfigError(f"{ctx.where}: the window of state {ctx.state.name!r} needs a txdag.trident aggregator, "
                              f"got {self.aggregator!r}")
        if self.top is not None and (isinstance(self.top, bool) or not isinstance(self.top, int) or self.top < 1):
            raise ConfigError(f"{ctx.where}: top must be an int >= 1 or None, got {self.top!r}")
        ref_of(self.aggregator)

    def stage(self, ctx: StageContext) -> OutputSpec:
        rows = self.frame.select(self._timestamp(ctx).alias("__ts"), *self.fields)
        count = stage_rows(ctx, rows)
        options = {"window": spec_to_dict(self.window), "fields": list(self.fields), "group_by": len(self.group_by),
                   "top": self.top, "new_values": self.new_values}
        return OutputSpec(WINDOW, count, ref_of(self.aggregator), options)

    def _timestamp(self, ctx: StageContext) -> Column:
        """Seconds since the epoch: the event time column, else the processing time (the same for the batch)."""
        if self.timestamp is None:
            return F.unix_micros(F.current_timestamp()) / 1e6
        kind = self.frame.schema[self.timestamp].dataType
        if isinstance(kind, TimestampType | TimestampNTZType | DateType):
            return F.unix_micros(F.col(self.timestamp).cast("timestamp")) / 1e6
        if isinstance(kind, NumericType):
            return F.col(self.timestamp).cast("double")
        raise ConfigError(f"{ctx.where}: timestamp column {self.timestamp!r} is {kind.simpleString()}; give a "
                          f"timestamp or a number of seconds since the epoch")


@dataclass(frozen=True)
class PersistOutput:
    """The batch's rows for the commit: handed to a StateUpdater's ``update_state(state, rows, collector)``, or,
    for a ReducerAggregator's persistent aggregate (``key_fields`` grouping columns first), folded per key into
    the stored value with ``reduce``."""

    frame: DataFrame
    updater: Any
    new_values: bool = False
    key_fields: int | None = None  # set for a reducer's persistent aggregate

    def check(self, ctx: StageContext) -> None:
        from txdag.contracts import ReducerAggregator, StateUpdater

        state = map_state(ctx, "partition_persist")
        if self.key_fields is not None:
            if not isinstance(self.updater, ReducerAggregator):
                raise ConfigError(f"{ctx.where}: {self.updater!r} is not a ReducerAggregator")
            if self.key_fields != state.key_fields:
                raise ConfigError(f"{ctx.where}: state {state.name!r} has key_fields={state.key_fields}, but the "
                                  f"persistent aggregate is grouped by {self.key_fields} field(s)")
        elif not isinstance(self.updater, StateUpdater):
            raise ConfigError(f"{ctx.where}: partition_persist into {ctx.state.name!r} needs a "
                              f"txdag.trident.StateUpdater, got {self.updater!r}")
        ref_of(self.updater)

    def stage(self, ctx: StageContext) -> OutputSpec:
        count = stage_rows(ctx, self.frame)
        options = {"fields": list(self.frame.columns), "new_values": self.new_values, "key_fields": self.key_fields}
        return OutputSpec(PERSIST, count, ref_of(self.updater), options)


@dataclass(frozen=True)
class SinkOutput:
    """The batch's rows for a sink: handed at the commit, in batch order, to the committer's ``commit(tx, rows)``
    (txdag.contracts.Committer), strictly in txid order."""

    frame: DataFrame
    committer: Any

    def check(self, ctx: StageContext) -> None:
        from txdag.contracts import Committer

        if not isinstance(ctx.state, Sink):
            raise ConfigError(f"{ctx.where}: commit_to returns the rows of a sink, and {ctx.state.name!r} is a state: "
                              f"declare Sink({ctx.state.name!r}) in the topology's sinks, or return the state's output")
        if not isinstance(self.committer, Committer):
            raise ConfigError(f"{ctx.where}: the sink {ctx.state.name!r} needs a txdag.trident.Committer, got "
                              f"{self.committer!r}")
        ref_of(self.committer)

    def stage(self, ctx: StageContext) -> OutputSpec:
        count = stage_rows(ctx, self.frame)
        return OutputSpec(SINK, count, ref_of(self.committer), {"fields": list(self.frame.columns)})
