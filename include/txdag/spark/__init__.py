"""The Spark side of txdag: one thin layer that turns a batch into a DataFrame and a job's output into staging.

The rest of txdag never imports pyspark. This package's own names are loaded lazily, so that
``txdag.spark.env`` (pyspark-free) can be imported where pyspark is absent or slow to import.

A job under ``spark_jobs/`` is a ``process(batch) -> {state: DataFrame}`` function and one line::

    if __name__ == "__main__":
        main(process)
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "main": "txdag.spark.cli",
    "run_main": "txdag.spark.cli",
    "JobResult": "txdag.spark.runner",
    "run_job": "txdag.spark.runner",
    "batch_frame": "txdag.spark.batch",
    "read_batch": "txdag.spark.batch",
    "BATCH_SCHEMA": "txdag.spark.batch",
    "spark_session": "txdag.spark.session",
    "local_session": "txdag.spark.session",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'txdag.spark' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
