"""Which Airflow components import the Spark Connect client before they fork task processes (txdag.airflow.preload)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from txdag.airflow.preload import forks_tasks, preload

LOCAL, CELERY = "LocalExecutor", "CeleryExecutor"


@pytest.mark.parametrize(("argv", "executor"), [
    (["/venv/bin/airflow", "scheduler"], LOCAL),
    (["/venv/bin/airflow", "scheduler", "--skip-serve-logs"], "airflow.executors.local_executor.LocalExecutor"),
    (["airflow", "scheduler"], "CeleryExecutor,LocalExecutor"),
    (["airflow", "celery", "worker", "--concurrency", "4"], CELERY),
])  # fmt: skip
def test_the_components_that_fork_tasks_preload(argv: list[str], executor: str) -> None:
    assert forks_tasks(argv, executor)


@pytest.mark.parametrize(("argv", "executor"), [
    (["airflow", "scheduler"], CELERY),  # its tasks are forked by the Celery workers
    (["airflow", "api-server"], LOCAL), (["airflow", "dag-processor"], LOCAL),
    (["airflow", "triggerer", "--skip-serve-logs"], LOCAL), (["airflow", "celery", "flower"], CELERY),
    (["airflow", "tasks", "test", "scheduler"], LOCAL), (["airflow"], LOCAL), (["python", "-c"], LOCAL),
])  # fmt: skip
def test_the_others_do_not(argv: list[str], executor: str) -> None:
    assert not forks_tasks(argv, executor)
    assert preload(argv, executor) is False


def test_preloading_imports_the_connect_client_and_starts_no_python_thread() -> None:
    code = ("import sys, threading; from txdag.airflow.preload import preload; "
            "assert 'pyspark.sql.connect.session' not in sys.modules; "
            "assert preload(['airflow', 'scheduler'], 'LocalExecutor'); "
            "assert 'pyspark.sql.connect.session' in sys.modules and 'txdag.spark.connect' in sys.modules; "
            "print(threading.active_count())")
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"


def test_an_airflow_without_pyspark_still_starts() -> None:
    code = ("import sys; sys.modules['pyspark'] = None; from txdag.airflow.preload import preload; "
            "print(preload(['airflow', 'scheduler'], 'LocalExecutor'))")
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr  # the warning goes where Airflow's logging sends it
    assert done.stdout.strip().splitlines()[-1] == "False", said
    assert "the Spark Connect client is not preloaded" in said and "pyspark" in said, said
