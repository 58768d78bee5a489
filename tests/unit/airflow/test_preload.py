"""Which Airflow components import the Spark Connect client before they fork task processes (txdag.airflow.preload)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from txdag.airflow.preload import forks_tasks, preload

LOCAL, CELERY = "LocalExecutor", "CeleryExecutor"
ROOT = Path(__file__).resolve().parents[3]


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
    assert done.stdout.strip() == "False", done.stdout
    assert "the Spark Connect client is not preloaded" in done.stderr and "pyspark" in done.stderr, done.stderr


@pytest.mark.parametrize(("command", "preloaded"), [("scheduler", True), ("triggerer", False)])
def test_airflow_runs_the_shipped_local_settings_as_it_is_imported(tmp_path, command: str, preloaded: bool) -> None:
    """The path a component takes: ``import airflow`` imports AIRFLOW_HOME/config/airflow_local_settings.py (the
    file scripts/airflow.sh copies there) while Airflow itself is half imported; the executor read from its config."""
    (tmp_path / "config").mkdir()
    shutil.copy(ROOT / "config" / "airflow_local_settings.py", tmp_path / "config")
    code = (f"import sys; sys.argv = ['airflow', {command!r}]; import airflow; "
            "print('txdag.spark.connect' in sys.modules, 'airflow_local_settings' in sys.modules)")
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__EXECUTOR": "LocalExecutor"}
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=120,
                          env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == f"{preloaded} True", done.stdout + done.stderr


def test_an_airflow_without_txdag_starts_and_says_why_nothing_was_preloaded(tmp_path) -> None:
    """The shipped local settings copied into an Airflow whose environment lacks txdag: a line, not a traceback
    (txdag's module made unimportable: this venv's Airflow still finds txdag's provider entry point)."""
    (tmp_path / "config").mkdir()
    shutil.copy(ROOT / "config" / "airflow_local_settings.py", tmp_path / "config")
    code = ("import sys; sys.modules['txdag.airflow.preload'] = None; sys.argv = ['airflow', 'scheduler']; "
            "import airflow; "
            "print('airflow_local_settings' in sys.modules, 'pyspark.sql.connect.session' in sys.modules)")
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__EXECUTOR": "LocalExecutor"}
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=120,
                          env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == "True False", done.stdout + done.stderr
    assert "txdag is not installed here" in done.stderr and "pip install" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
