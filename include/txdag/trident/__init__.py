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

import importlib
from typing import Any

_EXPORTS = {
    "Aggregator": "txdag.contracts",
    "AggregatorError": "txdag.contracts",
    "Collector": "txdag.contracts",
    "CombinerAggregator": "txdag.contracts",
    "Committer": "txdag.contracts",
    "MapGet": "txdag.contracts",
    "QueryFunction": "txdag.contracts",
    "ReducerAggregator": "txdag.contracts",
    "StateUpdater": "txdag.contracts",
    "column_value": "txdag.contracts",
    "combiner_updater": "txdag.contracts",
    "reducer_updater": "txdag.contracts",
    "persistent_aggregate": "txdag.trident.persist",
    "partition_persist": "txdag.trident.persist",
    "window": "txdag.trident.persist",
    "commit_to": "txdag.trident.persist",
    "stateful": "txdag.spark.stateful",
    "StatefulStep": "txdag.state.kv.step",
    "SlidingCountWindow": "txdag.windows.rules",
    "TumblingCountWindow": "txdag.windows.rules",
    "SlidingDurationWindow": "txdag.windows.rules",
    "TumblingDurationWindow": "txdag.windows.rules",
    "SlidingBatchWindow": "txdag.windows.rules",
    "TumblingBatchWindow": "txdag.windows.rules",
    "values_key": "txdag.commit.newvalues",
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
