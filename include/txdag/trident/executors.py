"""The functions the operations hand to Spark (mapInArrow, groupBy().applyInArrow): they run on the executors.

Arrow, not pandas, carries the rows: values arrive as Python objects with nulls as None and integers as ints
(pandas would turn a bigint column with a null into floats). Each builder returns a closure over the aggregator
and the column layout; the per-row work is the pure kernels of ``txdag.contracts``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from typing import Any

import pyarrow as pa
from pyspark.sql import Row
from pyspark.sql.types import StructType

from txdag.contracts import AnyAggregator, CombinerAggregator, add_row, apply, fold_rows, fold_values
from txdag.trident.schema import to_record_batch

MARK = "__txdag_sentinel"  # the extra row that makes a global aggregate run once even over an empty batch
KEY = "__txdag_key{}"  # grouping columns under names of their own, so an input field may also be a key
BatchFn = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
TableFn = Callable[[pa.Table], pa.Table]


def values_of(data: pa.RecordBatch | pa.Table) -> Iterator[tuple[Any, ...]]:
    """The rows of an Arrow batch or table as tuples of Python values (maps as dicts)."""
    return zip(*(column.to_pylist(maps_as_pydicts="lossy") for column in data.columns))


def rows_of(batches: Iterable[pa.RecordBatch], names: Sequence[str], skip: int = 0,
            marked: bool = False) -> Iterator[Any]:
    """Rows (``pyspark.sql.Row`` of ``names``) of the columns after the first ``skip``; with ``marked``, the last
    column flags the sentinel row, which is left out."""
    make = Row(*names)
    end = skip + len(names)
    for batch in batches:
        for values in values_of(batch):
            if not (marked and values[-1]):
                yield make(*values[skip:end])


def freeze(value: Any) -> Any:
    """A hashable stand-in for a grouping value (array and map keys come as lists and dicts)."""
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, freeze(v)) for k, v in value.items())
    return value


def per_partition(agg: AnyAggregator, names: Sequence[str], schema: StructType, batch_id: Any) -> BatchFn:
    """partition_aggregate: ``agg`` over each non-empty partition on its own."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = rows_of(batches, names)
        first = next(rows, None)
        if first is None:  # Spark calls some empty partitions and not others: none of them emits
            return
        out = apply(agg, chain([first], rows), batch_id)
        if out:
            yield to_record_batch(agg, schema, out, "its result over a partition")

    return run


def partition_partials(agg: CombinerAggregator, names: Sequence[str], schema: StructType) -> BatchFn:
    """Phase 1 of a global combiner: one partial per non-empty partition, then a False marker."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = rows_of(batches, names)
        first = next(rows, None)
        if first is not None:
            yield to_record_batch(agg, schema, [(fold_rows(agg, chain([first], rows)), False)], "a partial")

    return run


def combine_partials(agg: CombinerAggregator, schema: StructType) -> BatchFn:
    """Phase 2 of a global combiner, in the one partition holding every partial and the sentinel."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        partials = (values[0] for batch in batches for values in values_of(batch) if not values[-1])
        yield to_record_batch(agg, schema, [(fold_values(agg, partials),)], "the combined partials")

    return run


def run_global(agg: AnyAggregator, names: Sequence[str], schema: StructType, batch_id: Any) -> BatchFn:
    """A global reducer or general aggregator, in the one partition holding every row and the sentinel."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        out = apply(agg, rows_of(batches, names, marked=True), batch_id)
        if out:
            yield to_record_batch(agg, schema, out, "its result over the batch")

    return run


def group_partials(agg: CombinerAggregator, keys: int, names: Sequence[str], schema: StructType) -> BatchFn:
    """Phase 1 of a grouped combiner: per partition, one partial per key (the first ``keys`` columns)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        make, end = Row(*names), keys + len(names)
        groups: dict[Any, list[Any]] = {}
        for batch in batches:
            for values in values_of(batch):
                row, key = make(*values[keys:end]), values[:keys]
                slot = groups.get(freeze(key))
                if slot is None:
                    slot = groups[freeze(key)] = [key, fold_rows(agg, ())]
                slot[1] = add_row(agg, slot[1], row)
        if groups:
            out = [(*key, value) for key, value in groups.values()]
            yield to_record_batch(agg, schema, out, "a partial of a group")

    return run


def combine_group(agg: CombinerAggregator, keys: int, schema: StructType) -> TableFn:
    """Phase 2 of a grouped combiner: the partials of one key, combined."""

    def run(table: pa.Table) -> pa.Table:
        rows = list(values_of(table))
        value = fold_values(agg, (r[keys] for r in rows))
        return pa.Table.from_batches([to_record_batch(agg, schema, [(*rows[0][:keys], value)], "a group's value")])

    return run


def apply_group(agg: AnyAggregator, keys: int, names: Sequence[str], schema: StructType, batch_id: Any) -> TableFn:
    """A grouped reducer or general aggregator over all the rows of one group; each output row starts with the
    group's key."""

    def run(table: pa.Table) -> pa.Table:
        key = next(values_of(table.select(list(range(keys)))))
        out = [(*key, *r) for r in apply(agg, rows_of(table.to_batches(), names, skip=keys), batch_id)]
        return pa.Table.from_batches([to_record_batch(agg, schema, out, "its result over a group")])

    return run
