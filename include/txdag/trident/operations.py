"""Trident's batch operations over a DataFrame (seed 001): partition_aggregate, aggregate, group_by().aggregate,
and persistent_aggregate's output (``persisted``; ``txdag.trident.persist`` has the rest of what a job returns).

Only DataFrame APIs (mapInArrow, groupBy().applyInArrow, unionByName, repartition), so the same code runs in a
classic session and over Spark Connect; every row is handled on the executors. A CombinerAggregator runs in two
phases (a partial per partition, then the partials combined), as Trident's combiner optimisation does; a reducer
or general aggregator sees all the rows of the batch, or of a group, in one place. The built-ins use their native
Spark expression unless ``native=False``. Everything about the aggregator and the columns is checked here, on
the driver, before Spark runs anything.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StructField, StructType

from txdag.contracts import Aggregator, AnyAggregator, CombinerAggregator, ReducerAggregator, check_aggregator
from txdag.errors import ConfigError
from txdag.spark.outputs import CombinedOutput
from txdag.spark.rows import PersistOutput
from txdag.trident import executors as ex
from txdag.trident.aggregators import Count, Sum
from txdag.trident.schema import check_clash, check_output, resolve

PLACEHOLDER = "__txdag_row"  # the one column handed over when an aggregator reads none (Count)
PARTITION = "__txdag_partition"
ADDITIVE = (Count, Sum)  # combine is +: their partials are added inside Redis


def col(name: str) -> Column:
    """A column by its exact name (a dot or a backtick in it is not a path)."""
    return F.col("`" + name.replace("`", "``") + "`")


def ship(obj: Any) -> None:
    """Executors unpickle a class by importing its module. A job file or a test module is loaded by path and
    cannot be imported there, so classes from modules outside txdag and site-packages travel by value."""
    module = sys.modules.get(type(obj).__module__)
    path = str(getattr(module, "__file__", None) or "")
    if module is None or module.__name__ in ("__main__", "builtins") or module.__name__.split(".")[0] == "txdag":
        return
    if "site-packages" in path or "dist-packages" in path:
        return
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(module)


def parse_ddl(df: DataFrame) -> Any:
    """The session's DDL parser (the JVM's in a classic session, the server's over Spark Connect)."""
    return df.sparkSession._parse_ddl  # both session kinds have it; no public API parses without wrapping


def field_names(df: DataFrame, given: Sequence[str] | str | None, default: Sequence[str] | None, who: Any,
                what: str) -> list[str]:
    names = [given] if isinstance(given, str) else list(given if given is not None else default or [])
    columns, label = df.columns, who if isinstance(who, str) else repr(who)
    missing = [n for n in names if n not in columns]
    if missing:
        raise ConfigError(f"{label}: {what} {missing} are not columns of the DataFrame (its columns: {columns})")
    if len(set(names)) != len(names):
        raise ConfigError(f"{label}: {what} {names} name a column twice")
    return names


@dataclass(frozen=True)
class Plan:
    """An aggregator checked against a DataFrame: the input columns it reads, and what it emits."""

    agg: AnyAggregator
    inputs: list[Column]
    names: list[str]
    input_schema: StructType
    schema: StructType
    native: Column | None
    batch_id: Any

    @property
    def out(self) -> StructField:
        return self.schema.fields[0]


def plan(df: DataFrame, agg: Any, input_fields: Sequence[str] | str | None, batch_id: Any, native: bool,
         keys: Sequence[str] = ()) -> Plan:
    check_aggregator(agg)
    default = agg.fields if agg.fields is not None else df.columns
    names = field_names(df, input_fields, default, agg, "input fields")
    inputs = [col(n) for n in names] or [F.lit(True).alias(PLACEHOLDER)]
    input_schema = df.select(*inputs).schema
    schema = resolve(agg, input_schema, parse_ddl(df))
    check_clash(agg, schema, keys, "grouping fields")
    check_output(agg, schema, batch_id)
    ship(agg)
    expr = agg.native(input_schema) if native else None
    return Plan(agg, inputs, input_schema.fieldNames(), input_schema, schema, expr, batch_id)


def partition_aggregate(df: DataFrame, aggregator: AnyAggregator, input_fields: Sequence[str] | str | None = None,
                        *, batch_id: Any = None, native: bool = True) -> DataFrame:
    """Trident's partitionAggregate: the aggregator over each partition of ``df`` on its own; the rows it emits
    for every non-empty partition (one per partition for a combiner or reducer)."""
    p = plan(df, aggregator, input_fields, batch_id, native)
    if p.native is not None:
        by_partition = df.groupBy(F.spark_partition_id().alias(PARTITION))
        return by_partition.agg(p.native.alias(p.out.name)).drop(PARTITION)
    return df.select(*p.inputs).mapInArrow(ex.per_partition(p.agg, p.names, p.schema, batch_id), p.schema)


def aggregate(df: DataFrame, aggregator: AnyAggregator, input_fields: Sequence[str] | str | None = None,
              *, batch_id: Any = None, native: bool = True) -> DataFrame:
    """Trident's aggregate: the whole batch. One row for a combiner (``zero()`` for an empty batch) or a reducer
    (``init()``); whatever ``complete`` emits for a general aggregator."""
    p = plan(df, aggregator, input_fields, batch_id, native)
    if p.native is not None:
        return df.agg(p.native.alias(p.out.name))
    if isinstance(p.agg, CombinerAggregator):
        marked = with_mark(p.schema)
        partials = df.select(*p.inputs).mapInArrow(ex.partition_partials(p.agg, p.names, marked), marked)
        together = partials.unionByName(sentinel(df, p.schema)).repartition(1)
        return together.mapInArrow(ex.combine_partials(p.agg, p.schema), p.schema)
    rows = df.select(*p.inputs, F.lit(False).alias(ex.MARK)).unionByName(sentinel(df, p.input_schema))
    return rows.repartition(1).mapInArrow(ex.run_global(p.agg, p.names, p.schema, batch_id), p.schema)


def with_mark(schema: StructType) -> StructType:
    return StructType([*schema.fields, StructField(ex.MARK, BooleanType(), False)])


def sentinel(df: DataFrame, schema: StructType) -> DataFrame:
    """One row of nulls flagged as the sentinel: a global aggregate then always has a partition to run in."""
    nulls = [F.lit(None).cast(f.dataType).alias(f.name) for f in schema.fields]
    return df.sparkSession.range(1).select(*nulls, F.lit(True).alias(ex.MARK))


def group_by(df: DataFrame, *fields: str) -> GroupedFrame:
    """Trident's groupBy: ``group_by(df, "user").aggregate(Count())``."""
    if not fields:
        raise ConfigError("group_by needs at least one grouping field; for the whole batch use aggregate(df, ...)")
    return GroupedFrame(df, tuple(field_names(df, fields, None, "group_by", "grouping fields")))


@dataclass(frozen=True)
class GroupedFrame:
    """A DataFrame grouped by columns; ``aggregate`` runs an aggregator per group."""

    df: DataFrame
    keys: tuple[str, ...]

    def aggregate(self, aggregator: AnyAggregator, input_fields: Sequence[str] | str | None = None, *,
                  batch_id: Any = None, native: bool = True) -> DataFrame:
        """Per group: the grouping fields, then the aggregator's columns (a combiner's value, per key). A
        combiner runs in two phases: a partial per key in each partition, then per key across partitions."""
        df, keys = self.df, self.keys
        p = plan(df, aggregator, input_fields, batch_id, native, keys)
        if p.native is not None:
            return df.groupBy(*[col(k) for k in keys]).agg(p.native.alias(p.out.name))
        hidden = [ex.KEY.format(i) for i in range(len(keys))]
        keyed = df.select(*[col(k).alias(h) for k, h in zip(keys, hidden)], *p.inputs)
        key_fields = [df.schema[k] for k in keys]
        out = StructType([*key_fields, *p.schema.fields])
        if isinstance(p.agg, CombinerAggregator):
            partial = StructType([*(StructField(h, f.dataType) for h, f in zip(hidden, key_fields)), p.out])
            partials = keyed.mapInArrow(ex.group_partials(p.agg, len(keys), p.names, partial), partial)
            return partials.groupBy(*hidden).applyInArrow(ex.combine_group(p.agg, len(keys), out), out)
        run = ex.apply_group(p.agg, len(keys), p.names, out, batch_id)
        return keyed.groupBy(*hidden).applyInArrow(run, out)

    def persistent_aggregate(self, aggregator: AnyAggregator, input_fields: Sequence[str] | str | None = None, *,
                             new_values: bool = False) -> DataFrame | CombinedOutput | PersistOutput:
        """Trident's persistentAggregate into the map state this is returned for, keyed by the grouping fields."""
        return persisted(self.df, self.keys, aggregator, input_fields, new_values=new_values)


def persisted(df: DataFrame, keys: tuple[str, ...], aggregator: Any, input_fields: Sequence[str] | str | None, *,
              new_values: bool) -> DataFrame | CombinedOutput | PersistOutput:
    """What a job returns for Trident's persistentAggregate of ``df`` grouped by ``keys`` (none: the whole batch,
    a global value). Count and Sum are staged as numeric partials (added in Redis); another CombinerAggregator
    stages its per-key partial, merged with ``combine`` at the commit; a ReducerAggregator stages the rows, folded
    into the stored value with ``reduce`` at the commit."""
    if isinstance(aggregator, CombinerAggregator):
        partials = (GroupedFrame(df, keys).aggregate(aggregator, input_fields) if keys
                    else aggregate(df, aggregator, input_fields))
        if isinstance(aggregator, ADDITIVE) and not new_values:
            return partials
        return CombinedOutput(partials, aggregator, new_values)
    if isinstance(aggregator, ReducerAggregator):
        names = field_names(df, input_fields, [c for c in df.columns if c not in keys], aggregator, "input fields")
        rows = df.select(*[col(k) for k in keys], *[col(n) for n in names])
        return PersistOutput(rows, aggregator, new_values, key_fields=len(keys))
    if isinstance(aggregator, Aggregator):
        raise ConfigError(f"{aggregator!r} is a general Aggregator: persistent_aggregate takes a CombinerAggregator or "
                          f"a ReducerAggregator (as Trident's does); aggregate first, then persist the result")
    raise ConfigError(f"{aggregator!r} is not an aggregator: subclass txdag.trident.CombinerAggregator or "
                      f"ReducerAggregator")
