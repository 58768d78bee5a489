"""Trident's aggregators and batch operations as a thin typed layer over PySpark DataFrames (seeds 001, 004).

Plain PySpark already does most of Trident (``each`` is ``select``/``withColumn``, ``project`` is ``select``,
``partitionBy`` is ``repartition``, ``groupBy`` + a built-in aggregate is ``groupBy().agg``); this package adds
what Spark lacks: Trident's aggregator contracts (CombinerAggregator, ReducerAggregator, Aggregator) run with
Trident's meaning by ``partition_aggregate``, ``aggregate`` and ``group_by(...).aggregate``, and
``state_query`` over a txdag State; and what a job returns per state when the commit needs more than sums:
``persistent_aggregate``, ``partition_persist``, ``window`` (windows over batches) and ``stateful`` (seed 002's
stateful steps). Names load lazily: the contracts and the built-ins import no pyspark, so
plain Python (a commit merging a partial with ``combine``) can use them without Spark.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Aggregator": "txdag.trident.contracts",
    "AggregatorError": "txdag.trident.contracts",
    "Collector": "txdag.trident.contracts",
    "CombinerAggregator": "txdag.trident.contracts",
    "MapGet": "txdag.trident.contracts",
    "QueryFunction": "txdag.trident.contracts",
    "ReducerAggregator": "txdag.trident.contracts",
    "StateUpdater": "txdag.trident.contracts",
    "column_value": "txdag.trident.contracts",
    "combiner_updater": "txdag.trident.contracts",
    "reducer_updater": "txdag.trident.contracts",
    "persistent_aggregate": "txdag.trident.persist",
    "partition_persist": "txdag.trident.persist",
    "window": "txdag.trident.persist",
    "stateful": "txdag.spark.stateful",
    "StatefulStep": "txdag.state.kv.step",
    "SlidingCountWindow": "txdag.windows",
    "TumblingCountWindow": "txdag.windows",
    "SlidingDurationWindow": "txdag.windows",
    "TumblingDurationWindow": "txdag.windows",
    "SlidingBatchWindow": "txdag.windows",
    "TumblingBatchWindow": "txdag.windows",
    "values_key": "txdag.newvalues",
    "Count": "txdag.trident.aggregators",
    "Max": "txdag.trident.aggregators",
    "Min": "txdag.trident.aggregators",
    "Sum": "txdag.trident.aggregators",
    "GroupedFrame": "txdag.trident.operations",
    "aggregate": "txdag.trident.operations",
    "group_by": "txdag.trident.operations",
    "partition_aggregate": "txdag.trident.operations",
    "job_redis_url": "txdag.trident.query",
    "state_query": "txdag.trident.query",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'txdag.trident' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
