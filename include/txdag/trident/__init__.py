"""Trident's aggregators and batch operations as a thin typed layer over PySpark DataFrames (seeds 001, 004).

Plain PySpark already does most of Trident (``each`` is ``select``/``withColumn``, ``project`` is ``select``,
``partitionBy`` is ``repartition``, ``groupBy`` + a built-in aggregate is ``groupBy().agg``); this package adds
what Spark lacks: Trident's aggregator contracts (CombinerAggregator, ReducerAggregator, Aggregator) run with
Trident's meaning by ``partition_aggregate``, ``aggregate`` and ``group_by(...).aggregate``, and
``state_query`` over a txdag State; and what a job returns per state when the commit needs more than sums:
``persistent_aggregate``, ``partition_persist``, ``window`` (windows over batches), ``stateful`` (seed 002's
stateful steps) and ``commit_to`` (a sink's rows for its Committer, in txid order). Names load lazily: the
contracts and the built-ins import no pyspark, so plain Python (a commit merging a partial with ``combine``) can
use them without Spark.
"""

from __future__ import annotations

from typing import Any

# each name by the module it is loaded from on first use (explicit imports, so the import graph sees them)
_CONTRACTS = {
    "Aggregator", "AggregatorError", "Collector", "CombinerAggregator", "Committer", "MapGet", "QueryFunction",
    "ReducerAggregator", "StateUpdater", "column_value", "combiner_updater", "reducer_updater",
}
_PERSIST = {"persistent_aggregate", "partition_persist", "window", "commit_to"}
_STATEFUL = {"stateful"}
_STEP = {"StatefulStep"}
_RULES = {
    "SlidingCountWindow", "TumblingCountWindow", "SlidingDurationWindow", "TumblingDurationWindow",
    "SlidingBatchWindow", "TumblingBatchWindow",
}
_NEWVALUES = {"values_key"}
_AGGREGATORS = {"Count", "Max", "Min", "Sum"}
_OPERATIONS = {"GroupedFrame", "aggregate", "group_by", "partition_aggregate"}
_QUERY = {"job_redis_url", "state_query"}

__all__ = sorted(_CONTRACTS | _PERSIST | _STATEFUL | _STEP | _RULES | _NEWVALUES | _AGGREGATORS | _OPERATIONS | _QUERY)


def __getattr__(name: str) -> Any:
    if name in _CONTRACTS:
        from txdag import contracts

        return getattr(contracts, name)
    if name in _PERSIST:
        from txdag.trident import persist

        return getattr(persist, name)
    if name in _STATEFUL:
        from txdag.spark import stateful

        return getattr(stateful, name)
    if name in _STEP:
        from txdag.state.kv import step

        return getattr(step, name)
    if name in _RULES:
        from txdag.windows import rules

        return getattr(rules, name)
    if name in _NEWVALUES:
        from txdag.commit import newvalues

        return getattr(newvalues, name)
    if name in _AGGREGATORS:
        from txdag.trident import aggregators

        return getattr(aggregators, name)
    if name in _OPERATIONS:
        from txdag.trident import operations

        return getattr(operations, name)
    if name in _QUERY:
        from txdag.trident import query

        return getattr(query, name)
    raise AttributeError(f"module 'txdag.trident' has no attribute {name!r}")
