"""The Spark side of txdag: one thin layer that turns a batch into a DataFrame and a job's output into staging.

The rest of txdag never imports pyspark. This package's own names are loaded lazily, so that
``txdag.spark.env`` (pyspark-free) can be imported where pyspark is absent or slow to import.

A job under ``spark_jobs/`` is a ``process(batch) -> {state: DataFrame}`` function and one line::

    if __name__ == "__main__":
        main(process)
"""

from __future__ import annotations

from typing import Any

# each name by the module it is loaded from on first use (explicit imports, so the import graph sees them)
_CLI = {"main", "run_main"}
_RUNNER = {"JobResult", "run_job"}
_BATCH = {"batch_frame", "read_batch", "BATCH_SCHEMA"}
_SESSION = {"spark_session", "local_session"}

__all__ = sorted(_CLI | _RUNNER | _BATCH | _SESSION)


def __getattr__(name: str) -> Any:
    if name in _CLI:
        from txdag.spark import cli

        return getattr(cli, name)
    if name in _RUNNER:
        from txdag.spark import runner

        return getattr(runner, name)
    if name in _BATCH:
        from txdag.spark import batch

        return getattr(batch, name)
    if name in _SESSION:
        from txdag.spark import session

        return getattr(session, name)
    raise AttributeError(f"module 'txdag.spark' has no attribute {name!r}")
