"""What a job returns for a state when the commit must do more than add numbers (seed 004's state updates).

``process(batch)`` returns ``{state name: output}``; besides a plain DataFrame of numeric partials:

- ``group_by(df, "word").persistent_aggregate(Count())`` / ``persistent_aggregate(df, agg)`` (global): Trident's
  persistentAggregate. Count and Sum are staged as numeric partials (added in Redis); another CombinerAggregator
  stages its per-key partial, merged with ``combine`` at the commit; a ReducerAggregator stages the rows, folded
  into the stored value with ``reduce`` at the commit. ``new_values=True`` also appends the updated values to the
  state's new values stream (txdag.commit.newvalues).
- ``partition_persist(df, updater)``: Trident's partitionPersist; the StateUpdater gets the batch's rows at the
  commit, and what it emits goes to the new values stream.
- ``window(df, spec, aggregator, group_by=..., top=...)``: windows over batches (seed 001); the windows each
  committed batch closes are aggregated at the commit, and the last one is the state's value.
- ``commit_to(df, committer)``, for a sink the topology declares (``Sink(name)``): Storm's committer bolt; the
  Committer gets the batch's rows at the commit, strictly in txid order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame

from txdag.contracts import Committer, StateUpdater
from txdag.errors import ConfigError
from txdag.spark.outputs import CombinedOutput
from txdag.spark.rows import PersistOutput, SinkOutput, WindowOutput
from txdag.trident.operations import GroupedFrame, persisted
from txdag.windows.rules import WindowSpec


def persistent_aggregate(df: DataFrame | GroupedFrame, aggregator: Any, input_fields: Sequence[str] | str | None = None,
                         *, new_values: bool = False) -> DataFrame | CombinedOutput | PersistOutput:
    """Trident's persistentAggregate of a grouped frame (a map state keyed by the grouping fields) or of a whole
    batch (a global value: a state with key_fields=0, Trident's SnapshottableMap); see operations.persisted."""
    if isinstance(df, GroupedFrame):
        return df.persistent_aggregate(aggregator, input_fields, new_values=new_values)
    return persisted(df, (), aggregator, input_fields, new_values=new_values)


def partition_persist(df: DataFrame, updater: StateUpdater, *, new_values: bool = False) -> PersistOutput:
    """Trident's partitionPersist: ``updater.update_state(state, rows, collector)`` at the commit, with the
    batch's rows (all of them, as one partition: the commit runs in one task)."""
    if not isinstance(updater, StateUpdater):
        raise ConfigError(f"{updater!r} is not a txdag.trident.StateUpdater: subclass it and define update_state")
    return PersistOutput(df, updater, new_values)


def window(df: DataFrame, spec: WindowSpec, aggregator: Any, *, group_by: Sequence[str] = (),
           timestamp: str | None = None, top: int | None = None, new_values: bool = False) -> WindowOutput:
    """The batch's rows into a window over batches (seed 001); each window a commit closes is aggregated per
    ``group_by`` group, cut to the ``top`` largest by its last column, and becomes the state's value."""
    return WindowOutput(df, spec, aggregator, tuple(group_by), timestamp, top, new_values)


def commit_to(df: DataFrame, committer: Committer) -> SinkOutput:
    """Storm's committer bolt: ``committer.commit(tx, rows)`` at the commit of each txid, in txid order, with the
    batch's rows (txdag.contracts.Committer: how a replay is skipped)."""
    if not isinstance(committer, Committer):
        raise ConfigError(f"{committer!r} is not a txdag.trident.Committer: subclass it and define last_applied and "
                          f"commit")
    return SinkOutput(df, committer)
