"""The Spark Connect client, imported once in the Airflow process that forks the task processes.

Airflow's LocalExecutor forks its workers from the scheduler as it starts, and each worker forks one process per
task (a Celery worker's pool forks the same way): a module imported before those forks is in every task process
already. Otherwise each warm ``process`` task imports the Connect client (pyspark's, with pandas, pyarrow and grpc)
itself: 0.4-0.7 s of every txid (bench/throughput.py, docs/performance.md). ``airflow_local_settings.py``, which
every Airflow component imports as it starts, calls :func:`preload`; only the components that fork tasks import
(the others would only grow by ~100 MB). Nothing connects: no channel or thread of ours exists before the fork.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def forks_tasks(argv: Sequence[str], executor: str) -> bool:
    """Whether ``argv`` (an ``airflow`` command line) starts a component that forks task processes: a Celery worker,
    or a scheduler whose executors (``[core] executor``) include the LocalExecutor."""
    words = [a for a in argv[1:] if not a.startswith("-")]
    return words[:2] == ["celery", "worker"] or (words[:1] == ["scheduler"] and "LocalExecutor" in executor)


def preload(argv: Sequence[str] | None = None, executor: str | None = None) -> bool:
    """Imports the Connect client and txdag's warm path where tasks are forked from; True if it did. It runs while
    Airflow itself is being imported (its settings import the local settings), so it never raises: a speed-up must
    not stop a scheduler from starting."""
    try:
        if executor is None:
            from airflow.configuration import conf

            executor = conf.get("core", "executor", fallback="")
        if not forks_tasks(sys.argv if argv is None else argv, executor):
            return False
        from airflow.providers.apache.spark.hooks import spark_connect  # noqa: F401

        import txdag.spark.connect  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - PySpark missing, a broken install: the tasks import it themselves
        print(f"txdag: the Spark Connect client is not preloaded ({type(exc).__name__}: {exc}); a warm process "
              "task imports it itself (txdag.airflow.preload)", file=sys.stderr)
        return False
    return True
